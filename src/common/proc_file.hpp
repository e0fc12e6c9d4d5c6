// Reading a small /proc file (a thread's stat or schedstat, the process's status) in one
// read(2) into a caller's buffer: no stream and no allocation, so it may run on a joining thread
// or while the library loads.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>

#include "common/unique_fd.hpp"

namespace actorcc {

// Reads `path` into `buf`, NUL-terminated (truncated to N - 1 bytes); false when it cannot.
template <size_t N>
bool read_proc(const char* path, char (&buf)[N]) noexcept {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  const ssize_t n = fd ? ::read(fd.get(), buf, N - 1) : -1;
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

}  // namespace actorcc
