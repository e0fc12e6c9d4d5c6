#include "transport/shm/shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "actorcc/error.hpp"
#include "common/deadline.hpp"

namespace actorcc {

namespace {

constexpr const char* kShmDir = "/dev/shm";  // where glibc's shm_open keeps its names

std::string errno_text(const std::string& what, const std::string& name, int err) {
  return what + " '" + name + "': " + std::strerror(err);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Whether `name` in /dev/shm (a directory descriptor and the entry) is still the file open as `fd`:
// false when it was removed, or removed and made anew, since `fd` was opened.
bool name_is(int dir, const char* entry, int fd) {
  struct stat by_name {}, by_fd {};
  return ::fstatat(dir, entry, &by_name, AT_SYMLINK_NOFOLLOW) == 0 && ::fstat(fd, &by_fd) == 0 &&
         same_file(by_name, by_fd);
}

// Segment names end in "-p<creator pid>" (ShmGroup names them so); other files are not ours.
bool segment_name(const std::string& n) {
  const size_t at = n.rfind("-p");
  if (at == std::string::npos || at + 2 >= n.size()) return false;
  return std::all_of(n.begin() + static_cast<std::ptrdiff_t>(at) + 2, n.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// The creator's lock on the file it has just created. A sweep may have opened the name in the
// instant between shm_open and this flock, found the lock free and removed the name (or be about
// to: it holds the lock for microseconds). So: retry a busy lock briefly, then check that the name
// is still this file. False: it was removed, and the caller creates it again.
bool lock_created(int fd, const std::string& name) {
  const Deadline dl = Deadline::after(std::chrono::milliseconds(1000));
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) throw SystemError(errno_text("flock of shared memory", name, errno));
    if (dl.expired())
      throw SystemError("shared memory segment '" + name + "': another process held its lock for a second");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  UniqueFd dir(::open(kShmDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) throw SystemError(errno_text("open", kShmDir, errno));
  return name_is(dir.get(), name.c_str() + 1, fd);  // the name without its leading '/'
}

void* map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw SystemError(errno_text("mmap of shared memory", name, errno));
  return p;
}

}  // namespace

// The creator's pid in the name is no evidence either way: in another pid namespace (a container
// sharing /dev/shm) a live creator's pid does not exist, and a dead creator's pid may belong to
// another process. The lock is evidence: the creator holds it from before the segment has a size
// until the name goes, and the kernel releases it when the creator dies. A free lock on a segment whose
// creator is still between shm_open and flock is the one false alarm; the creator finds its name
// gone after locking and creates it again (lock_created).
int ShmSegment::remove_orphans(const std::string& prefix) noexcept {
  int removed = 0;
  DIR* d = ::opendir(kShmDir);
  if (!d) return 0;
  const int dir = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) != 0 || !segment_name(n)) continue;
    struct stat st {};
    if (::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
      continue;
    UniqueFd fd(::openat(dir, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.get() < 0) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its creator holds it: in use
    // Another sweep may have removed this file since we opened it, and a creator made the name
    // anew: that one is not ours to judge by this lock.
    if (!name_is(dir, e->d_name, fd.get())) continue;
    if (::unlinkat(dir, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

ShmSegment::~ShmSegment() { release(); }

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : name_(std::move(o.name_)), addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)),
      owner_(std::exchange(o.owner_, false)), lock_(std::move(o.lock_)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    release();
    name_ = std::move(o.name_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owner_ = std::exchange(o.owner_, false);
    lock_ = std::move(o.lock_);
  }
  return *this;
}

void ShmSegment::release() noexcept {
  unlink();
  if (addr_) ::munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

// The name goes before the lock, so no sweep ever sees this name with its lock free.
void ShmSegment::unlink() noexcept {
  if (owner_) ::shm_unlink(name_.c_str());
  owner_ = false;
  lock_.reset();
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  ShmSegment s;
  for (int attempt = 0;; ++attempt) {
    UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
    if (fd.get() < 0) throw SystemError(errno_text("shm_open(create)", name, errno));
    if (lock_created(fd.get(), name)) {
      s.lock_ = std::move(fd);
      break;
    }
    if (attempt == 10)
      throw SystemError("shared memory segment '" + name +
                        "' was removed by another process as soon as it was created, 10 times in a row");
  }
  s.name_ = name;
  s.owner_ = true;  // from here on the destructor unlinks if anything below fails
  const int fd = s.lock_.get();
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    throw SystemError(errno_text("ftruncate of shared memory", name, errno) + " (" + std::to_string(bytes) + " bytes)");
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0 && err != EOPNOTSUPP && err != EINVAL)
    throw SystemError(errno_text("reserving shared memory", name, err) + " (" + std::to_string(bytes) +
                      " bytes; is /dev/shm full or too small?)");
  s.addr_ = map_fd(fd, bytes, name);
  s.size_ = bytes;
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR, 0600));
  if (fd.get() < 0) {
    if (errno == ENOENT)
      throw SystemError("the shared memory segment '" + name +
                        "' was removed before this process opened it (another process removed it: one in a "
                        "container sharing /dev/shm, or a cleanup of /dev/shm?)");
    throw SystemError(errno_text("shm_open", name, errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw SystemError(errno_text("fstat of shared memory", name, errno));
  if (static_cast<size_t>(st.st_size) < bytes)
    throw SystemError("the shared memory segment '" + name + "' has " + std::to_string(st.st_size) +
                      " bytes, not the " + std::to_string(bytes) + " its creator made (replaced by another process?)");
  ShmSegment s;
  s.name_ = name;
  s.addr_ = map_fd(fd.get(), bytes, name);
  s.size_ = bytes;
  return s;
}

}  // namespace actorcc
