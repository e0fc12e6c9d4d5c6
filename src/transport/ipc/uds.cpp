#include "transport/ipc/uds.hpp"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "actorcc/error.hpp"

namespace actorcc::ipc {
namespace {

socklen_t make_addr(const std::string& name, sockaddr_un& a) {
  std::memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(a.sun_path) - 2);
  a.sun_path[0] = '\0';  // abstract namespace
  std::memcpy(a.sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

std::string sys_err(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Abstract sockets have no permissions: anyone on the host can bind or connect a name. The
// kernel's record of who holds the other end (SO_PEERCRED) is what keeps the exchange inside
// this user's processes: a descriptor of GPU memory is never sent to, nor taken from, another
// user.
uid_t peer_uid(int sock) {
  ucred c{};
  socklen_t len = sizeof c;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) throw SystemError(sys_err("getsockopt(SO_PEERCRED)"));
  return c.uid;
}

int poll_ms(Deadline dl) {
  auto ms = dl.remaining().count();
  if (ms > 100) ms = 100;  // wake up regularly so the caller can re-check its deadline
  return static_cast<int>(ms);
}

}  // namespace

UniqueFd uds_listen(const std::string& name) {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw SystemError(sys_err("socket(AF_UNIX)"));
  sockaddr_un a;
  socklen_t len = make_addr(name, a);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    throw SystemError(sys_err(("bind(@" + name + ")").c_str()));
  if (::listen(s.get(), 64) != 0) throw SystemError(sys_err("listen(AF_UNIX)"));
  return s;
}

UniqueFd uds_connect(const std::string& name, Deadline deadline) {
  sockaddr_un a;
  socklen_t len = make_addr(name, a);
  for (;;) {
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) throw SystemError(sys_err("socket(AF_UNIX)"));
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), len) == 0) {
      const uid_t uid = peer_uid(s.get());
      if (uid != ::geteuid())
        throw SystemError("IPC exchange: the socket @" + name + " is held by uid " + std::to_string(uid) +
                          ", not by this user (" + std::to_string(::geteuid()) + "): refusing to send it a descriptor");
      return s;
    }
    if (deadline.expired()) throw TimeoutError(sys_err(("connect(@" + name + ")").c_str()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

UniqueFd uds_accept(int listener, Deadline deadline) {
  for (;;) {
    pollfd p{listener, POLLIN, 0};
    int r = ::poll(&p, 1, poll_ms(deadline));
    if (r > 0) {
      int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        UniqueFd conn(c);
        if (peer_uid(c) == ::geteuid()) return conn;
        continue;  // another user's connection: dropped, keep waiting for the real peer
      }
      if (errno != EINTR && errno != EAGAIN) throw SystemError(sys_err("accept(AF_UNIX)"));
    } else if (r < 0 && errno != EINTR) {
      throw SystemError(sys_err("poll(AF_UNIX listener)"));
    }
    if (deadline.expired()) throw TimeoutError("timed out waiting for a local peer to connect (IPC exchange)");
  }
}

void uds_send(int sock, const void* data, size_t n, int fd) {
  msghdr m{};
  iovec io{const_cast<void*>(data), n};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))];
  std::memset(buf, 0, sizeof buf);
  if (fd >= 0) {
    m.msg_control = buf;
    m.msg_controllen = sizeof buf;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    ssize_t r = ::sendmsg(sock, &m, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(n)) return;
    if (r < 0 && errno == EINTR) continue;
    throw SystemError(sys_err("sendmsg(AF_UNIX)"));
  }
}

UniqueFd uds_recv(int sock, void* data, size_t n, Deadline deadline) {
  UniqueFd got;
  size_t done = 0;
  while (done < n) {
    pollfd p{sock, POLLIN, 0};
    int pr = ::poll(&p, 1, poll_ms(deadline));
    if (pr == 0) {
      if (deadline.expired()) throw TimeoutError("timed out receiving from a local peer (IPC exchange)");
      continue;
    }
    if (pr < 0) {
      if (errno == EINTR) continue;
      throw SystemError(sys_err("poll(AF_UNIX)"));
    }
    msghdr m{};
    iovec io{static_cast<char*>(data) + done, n - done};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))];
    m.msg_control = buf;
    m.msg_controllen = sizeof buf;
    ssize_t r = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw SystemError(sys_err("recvmsg(AF_UNIX)"));
    }
    if (r == 0) throw SystemError("local peer closed the IPC socket early");
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
        got.reset(fd);
      }
    done += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace actorcc::ipc
