#include "transport/shm/shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "actorcc/error.hpp"

namespace actorcc {

namespace {

std::string errno_text(const std::string& what, const std::string& name, int err) {
  return what + " '" + name + "': " + std::strerror(err);
}

// Dead: no such process, or a zombie (it has exited, and its parent, a launcher or Ray's raylet,
// has not reaped it yet; it can never touch the segment again). EPERM from kill means another
// user's live process.
bool process_gone(pid_t pid) noexcept {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return errno == ENOENT;
  char buf[512];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

void* map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw SystemError(errno_text("mmap of shared memory", name, errno));
  return p;
}

}  // namespace

int ShmSegment::remove_orphans(const std::string& prefix) noexcept {
  int removed = 0;
  DIR* d = ::opendir("/dev/shm");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t at = n.rfind("-p");
    if (at == std::string::npos || at + 2 >= n.size()) continue;
    char* end = nullptr;
    const long pid = std::strtol(n.c_str() + at + 2, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::geteuid()) continue;
    if (!process_gone(static_cast<pid_t>(pid))) continue;
    if (::shm_unlink(("/" + n).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

ShmSegment::~ShmSegment() { release(); }

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : name_(std::move(o.name_)), addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)),
      owner_(std::exchange(o.owner_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    release();
    name_ = std::move(o.name_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owner_ = std::exchange(o.owner_, false);
  }
  return *this;
}

void ShmSegment::release() noexcept {
  unlink();
  if (addr_) ::munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

void ShmSegment::unlink() noexcept {
  if (owner_) ::shm_unlink(name_.c_str());
  owner_ = false;
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  ShmSegment s;
  UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
  if (fd.get() < 0) throw SystemError(errno_text("shm_open(create)", name, errno));
  s.name_ = name;
  s.owner_ = true;  // from here on the destructor unlinks if anything below fails
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    throw SystemError(errno_text("ftruncate of shared memory", name, errno) + " (" + std::to_string(bytes) + " bytes)");
  if (int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0 && err != EOPNOTSUPP && err != EINVAL)
    throw SystemError(errno_text("reserving shared memory", name, err) + " (" + std::to_string(bytes) +
                      " bytes; is /dev/shm full or too small?)");
  s.addr_ = map_fd(fd.get(), bytes, name);
  s.size_ = bytes;
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes, Deadline deadline) {
  for (;;) {
    UniqueFd fd(::shm_open(name.c_str(), O_RDWR, 0600));
    if (fd.get() >= 0) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) throw SystemError(errno_text("fstat of shared memory", name, errno));
      if (static_cast<size_t>(st.st_size) >= bytes) {
        ShmSegment s;
        s.name_ = name;
        s.addr_ = map_fd(fd.get(), bytes, name);
        s.size_ = bytes;
        return s;
      }
    } else if (errno != ENOENT) {
      throw SystemError(errno_text("shm_open", name, errno));
    }
    // Not there yet (or still being sized by its creator): retry until the deadline.
    if (deadline.expired())
      throw TimeoutError("shared memory segment '" + name + "' did not appear (or stayed smaller than " +
                         std::to_string(bytes) + " bytes) before the deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace actorcc
