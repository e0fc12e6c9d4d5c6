// UniqueFd: the one owner of a file descriptor in actorcc (sockets of the bootstrap and the TCP
// transport, Unix-domain sockets and exported VMM handles of the ipc transport, shared-memory
// segments). Every descriptor actorcc opens goes into one the moment it exists, so each is
// closed exactly once on every path, exceptions included.
#pragma once
#include <utility>

namespace actorcc {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  // Gives the descriptor up without closing it (the caller owns it now).
  int release() noexcept { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace actorcc
