// Unix-domain sockets in the abstract namespace (no files to clean up, gone with the process)
// carrying a small header plus one file descriptor (SCM_RIGHTS). Every wait is bounded.
#pragma once
#include <cstddef>
#include <string>

#include "common/deadline.hpp"
#include "transport/ipc/vmm.hpp"

namespace actorcc::ipc {

UniqueFd uds_listen(const std::string& name);                      // throws SystemError
UniqueFd uds_connect(const std::string& name, Deadline deadline);  // retries until the deadline
UniqueFd uds_accept(int listener, Deadline deadline);              // throws TimeoutError
// Sends `n` bytes of `data` and, when fd >= 0, the descriptor alongside.
void uds_send(int sock, const void* data, size_t n, int fd);
// Receives exactly `n` bytes and the descriptor sent with them (invalid if none).
UniqueFd uds_recv(int sock, void* data, size_t n, Deadline deadline);

}  // namespace actorcc::ipc
