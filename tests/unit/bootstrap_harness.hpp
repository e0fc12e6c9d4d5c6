// Shared by the bootstrap tests (test_bootstrap_join.cpp, test_bootstrap_faults.cpp,
// test_bootstrap_limits.cpp): threads play the ranks, the root runs on its own thread, and raw
// sockets play misbehaving peers.
#pragma once
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "actorcc/error.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/frame_io.hpp"
#include "bootstrap/hello_auth.hpp"
#include "bootstrap/id_fields.hpp"

namespace bootstrap_test {

using namespace actorcc;
using namespace std::chrono;

inline Deadline in(milliseconds ms) { return Deadline::after(ms); }

inline std::unique_ptr<Bootstrap> join(const UniqueId& id, int rank, int world, milliseconds timeout = milliseconds(10000),
                                std::shared_ptr<AbortSignal> abort = nullptr) {
  if (!abort) abort = std::make_shared<AbortSignal>(rank);
  return Bootstrap::join(id, rank, world, "blob-" + std::to_string(rank), in(timeout), abort);
}

// Runs fn(rank) on `world` threads; returns each thread's exception (null when none).
inline std::vector<std::exception_ptr> run_ranks(int world, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errs(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

inline void expect_ok(const std::vector<std::exception_ptr>& errs) {
  for (size_t r = 0; r < errs.size(); ++r) {
    if (!errs[r]) continue;
    try {
      std::rethrow_exception(errs[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " threw: " << e.what();
    }
  }
}

template <class E>
inline std::string expect_throw(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A connection speaking the protocol by hand, for peers the real client would never be. It
// reads the root's CHALLENGE first (into `nonce`, when asked), as every connection gets one.
inline net::Fd raw_connect(const UniqueId& id, wire::Token* nonce = nullptr) {
  net::Fd fd = net::connect_with_retry(bootstrap::read_id(id).root, in(milliseconds(2000)), nullptr, -1);
  auto got = wire::recv_message(fd.get(), in(milliseconds(2000)));
  if (nonce) {
    EXPECT_TRUE(got.msg && std::holds_alternative<wire::Challenge>(*got.msg)) << "no CHALLENGE: " << got.io.detail;
    if (got.msg && std::holds_alternative<wire::Challenge>(*got.msg)) *nonce = std::get<wire::Challenge>(*got.msg).nonce;
  }
  return fd;
}
// A HELLO for the id's group, not signed yet: its `mac` holds the key to sign it with (the id's
// token; a test that flips a byte of it plays a peer without the token). signed_hello() signs.
inline wire::Hello hello_for(const UniqueId& id, int rank, int world) {
  wire::Hello h;
  h.mac = bootstrap::read_id(id).token;
  h.rank = rank;
  h.world = world;
  h.join_timeout_ms = 10000;
  return h;
}
inline wire::Hello signed_hello(wire::Hello h, const wire::Token& nonce) {
  bootstrap::sign_hello(h, h.mac, nonce);
  return h;
}
inline wire::Message raw_exchange(const UniqueId& id, const wire::Hello& h) {
  wire::Token nonce{};
  net::Fd fd = raw_connect(id, &nonce);
  EXPECT_EQ(wire::send_message(fd.get(), signed_hello(h, nonce), in(milliseconds(2000))).status, net::IoStatus::Ok);
  auto got = wire::recv_message(fd.get(), in(milliseconds(2000)));
  EXPECT_EQ(got.io.status, net::IoStatus::Ok) << got.io.detail;
  return got.msg.value_or(wire::Bye{});
}

inline uint16_t free_port() {
  net::Fd l = net::listen_on(net::SockAddr::any(AF_INET, 0));
  return net::local_address(l.get()).port();
}

inline int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

// Sends a frame header announcing `length` payload bytes of `type`, and nothing else.
inline void send_header(int fd, wire::MsgType type, uint32_t length) {
  uint8_t h[wire::kHeaderBytes];
  auto put = [&](size_t at, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) h[at + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  put(0, wire::kFrameMagic, 4);
  put(4, wire::kFrameVersion, 2);
  put(6, static_cast<uint16_t>(type), 2);
  put(8, length, 4);
  ASSERT_EQ(net::send_all(fd, h, sizeof(h), in(milliseconds(1000))).status, net::IoStatus::Ok);
}

inline bool closed_within(int fd, milliseconds ms) {
  char c;
  return net::recv_all(fd, &c, 1, in(ms)).status == net::IoStatus::Closed;
}

}  // namespace bootstrap_test
