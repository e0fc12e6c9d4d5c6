// ShmSegment: an RAII POSIX shared-memory mapping. The creator owns the name until unlink();
// the mapping lives until the object dies. Unlinking as soon as every local rank has mapped
// the segment means a SIGKILL later leaves nothing behind in /dev/shm: the kernel frees the
// memory when the last mapping goes.
// Until then the creator holds an exclusive flock on the segment's file: the one sign of life a
// process in another pid namespace sharing /dev/shm (docker --ipc=host, unshare -p) can see, where
// the creator's pid means nothing. The kernel drops the lock when the creator dies, however it dies.
#pragma once
#include <cstddef>
#include <string>

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

  // Creates `name` ("/actorcc-...") exclusively, locks it (before it has a size, so a sweep never
  // takes a sized segment for an orphan), sizes it and reserves its pages (so a full /dev/shm
  // fails here with an error instead of SIGBUS later), and maps it zero-filled. The lock is held
  // until unlink(). Throws SystemError.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Opens and maps an existing segment of at least `bytes`. The caller knows it exists (its
  // creator announced it), so a missing one was removed by someone else: that fails at once,
  // saying so, instead of waiting for a segment that will never come back. Throws SystemError.
  static ShmSegment open(const std::string& name, size_t bytes);

  // Removes the name and releases the lock (creator only; idempotent). The mapping stays valid.
  void unlink() noexcept;

  // Removes every segment in /dev/shm whose name starts with `prefix` and ends in "-p<digits>"
  // (ShmGroup's names), that belongs to this user, and whose creator's lock is free: the creator
  // is gone (exited, killed, a zombie), in this pid namespace or any other: what a group left
  // behind when its processes were killed during setup, before any could unlink. Returns how
  // many were removed.
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
  UniqueFd lock_;       // the creator's descriptor holding the flock, while owner_
};

}  // namespace actorcc
