#include "common/unique_fd.hpp"

#include <unistd.h>

namespace actorcc {

void UniqueFd::reset(int fd) noexcept {
  // close() is not retried on EINTR: on Linux the descriptor is released regardless, and a
  // retry could close a descriptor another thread has just been given.
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

}  // namespace actorcc
