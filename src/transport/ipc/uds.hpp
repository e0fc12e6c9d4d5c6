// Unix-domain sockets in the abstract namespace (no files to clean up, gone with the process)
// carrying a small header plus one file descriptor (SCM_RIGHTS). Every wait is bounded. Only
// processes of this user take part (SO_PEERCRED on both ends): uds_accept drops another user's
// connection, uds_connect refuses a name another user holds.
#pragma once
#include <cstddef>
#include <chrono>
#include <string>

#include "common/deadline.hpp"
#include "common/unique_fd.hpp"

namespace actorcc::ipc {

UniqueFd uds_listen(const std::string& name);                      // throws SystemError
UniqueFd uds_connect(const std::string& name, Deadline deadline);  // retries until the deadline
// A connected peer's header must arrive this soon (a stranger that connects and says nothing
// must not hold the exchange for the whole join deadline).
constexpr std::chrono::milliseconds kUdsHandshake{5000};
UniqueFd uds_accept(int listener, Deadline deadline);              // throws TimeoutError
// Sends `n` bytes of `data` and, when fd >= 0, the descriptor alongside.
void uds_send(int sock, const void* data, size_t n, int fd);
// Receives exactly `n` bytes and the descriptor sent with them (invalid if none).
UniqueFd uds_recv(int sock, void* data, size_t n, Deadline deadline);

}  // namespace actorcc::ipc
