// ShmSegment: an RAII POSIX shared-memory mapping. The creator owns the name until unlink();
// the mapping lives until the object dies. Unlinking as soon as every local rank has mapped
// the segment means a SIGKILL later leaves nothing behind in /dev/shm: the kernel frees the
// memory when the last mapping goes.
#pragma once
#include <cstddef>
#include <string>

#include "common/deadline.hpp"
#include "common/unique_fd.hpp"

namespace actorcc {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates `name` ("/actorcc-...") exclusively, sizes it and reserves its pages (so a full
  // /dev/shm fails here with an error instead of SIGBUS later), and maps it zero-filled.
  // Throws SystemError.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Opens and maps an existing segment of at least `bytes`, retrying until `deadline` while it
  // does not exist yet or is still being sized. Throws SystemError / TimeoutError.
  static ShmSegment open(const std::string& name, size_t bytes, Deadline deadline);

  // Removes the name (creator only; idempotent). The mapping stays valid.
  void unlink() noexcept;

  // Segment names end in "-p<creator pid>". Removes every segment in /dev/shm whose name starts
  // with `prefix`, that belongs to this user, and whose creator is no longer alive (exited, or a
  // zombie its parent has not reaped yet): what a group left behind when its processes were
  // killed during setup, before any could unlink. Returns how many were removed.
  static int remove_orphans(const std::string& prefix) noexcept;

  void* data() const { return addr_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool owns_name() const { return owner_; }

 private:
  void release() noexcept;
  std::string name_;
  void* addr_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;  // created by this process and not yet unlinked
};

}  // namespace actorcc
