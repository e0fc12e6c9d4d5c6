// TCP transport inside one process over loopback: threads play the ranks (each with its own
// bootstrap client; the root runs in this process), raw sockets play strangers on the port.
#include <gtest/gtest.h>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <barrier>
#include <functional>
#include <random>
#include <thread>

#include "actorcc/error.hpp"
#include "actorcc/unique_id.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/id_fields.hpp"
#include "transport/tcp/frame.hpp"
#include "transport/tcp/listener.hpp"
#include "transport/tcp/mesh.hpp"

using namespace actorcc;
using namespace std::chrono;

namespace {

Deadline in(milliseconds ms) { return Deadline::after(ms); }

struct Group {
  UniqueId id = UniqueId::create("127.0.0.1");
  bootstrap::IdFields fields = bootstrap::read_id(id);
};

// One rank: its bootstrap, abort signal and mesh with `peers`.
struct Rank {
  std::shared_ptr<AbortSignal> abort;
  std::unique_ptr<Bootstrap> bs;
  std::unique_ptr<tcp::Mesh> mesh;
  Rank(const Group& g, int rank, int world, const std::vector<int>& peers)
      : abort(std::make_shared<AbortSignal>(rank)),
        bs(Bootstrap::join(g.id, rank, world, "r" + std::to_string(rank), in(milliseconds(10000)), abort)),
        mesh(tcp::Mesh::connect(*bs, g.fields.token, g.fields.root, peers, in(milliseconds(10000)), abort.get())) {}
};

std::vector<int> all_but(int self, int world) {
  std::vector<int> v;
  for (int q = 0; q < world; ++q)
    if (q != self) v.push_back(q);
  return v;
}

// Runs fn(rank) on `world` threads, each rank fully connected, and returns what each threw
// ("" when nothing). No rank closes its sockets before every rank's fn has returned, so a
// rank's error is its own and not the echo of a peer that already left.
std::vector<std::string> on_ranks(const Group& g, int world, const std::function<void(Rank&)>& fn) {
  std::vector<std::string> err(world);
  std::barrier sync(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      std::unique_ptr<Rank> me;
      try {
        me = std::make_unique<Rank>(g, r, world, all_but(r, world));
        fn(*me);
      } catch (const std::exception& e) {
        err[r] = e.what();
        if (err[r].empty()) err[r] = "(empty what())";
      }
      sync.arrive_and_wait();
    });
  for (auto& t : ts) t.join();
  return err;
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace

TEST(TcpFrame, HelloRoundTripsAndEveryFieldIsChecked) {
  wire::Token tok{};
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<uint8_t>(i * 7 + 1);
  tcp::Hello h{tok, 2, 5, 8};
  auto bytes = tcp::encode(h);
  std::string why;
  auto back = tcp::decode_hello(bytes.data(), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(tcp::check_hello(*back, tok, 5, 8), "");
  EXPECT_EQ(back->from_rank, 2);

  wire::Token other = tok;
  other[15] ^= 1;
  EXPECT_EQ(tcp::check_hello(*back, other, 5, 8), "wrong group token");
  EXPECT_NE(tcp::check_hello(*back, tok, 4, 8).find("addressed to rank 5"), std::string::npos);
  EXPECT_NE(tcp::check_hello(*back, tok, 5, 9).find("world"), std::string::npos);
  EXPECT_NE(tcp::check_hello(tcp::Hello{tok, 9, 5, 8}, tok, 5, 8).find("out of range"), std::string::npos);

  auto bad = bytes;
  bad[0] ^= 0xff;
  EXPECT_FALSE(tcp::decode_hello(bad.data(), &why));
  bad = bytes;
  bad[4] = 9;  // version
  EXPECT_FALSE(tcp::decode_hello(bad.data(), &why));
  EXPECT_NE(why.find("version 9"), std::string::npos) << why;

  CallDesc call;
  call.count = 0x0102030405060708ULL;
  call.root = -7;
  call.coll = 3;
  call.dtype = 4;
  call.op = 5;
  call.valid = 1;
  auto f = tcp::encode(tcp::FrameHeader{0x1122334455667788ULL, 12345, call});
  auto fb = tcp::decode_frame_header(f.data());
  ASSERT_TRUE(fb);
  EXPECT_EQ(fb->tag, 0x1122334455667788ULL);
  EXPECT_EQ(fb->length, 12345u);
  EXPECT_TRUE(fb->call == call);
  f[5] = 1;  // reserved
  EXPECT_FALSE(tcp::decode_frame_header(f.data()));
}

// Every rank sends to every other at once, in both directions, sizes from 0 to beyond the
// socket buffers: data arrives intact and the simultaneous sends cannot deadlock.
TEST(TcpTransport, FullMeshExchangesOddAndLargeSizes) {
  const int world = 4;
  Group g;
  uint32_t seed = std::random_device{}();
  auto err = on_ranks(g, world, [&](Rank& me) {
    int r = me.bs->rank();
    uint64_t tag = 0;
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{65537}, (size_t{6} << 20) + 3}) {
      for (int shift = 1; shift < world; ++shift, ++tag) {
        int to = (r + shift) % world, from = (r - shift + world) % world;
        auto out = pattern(n, seed + r * 131 + to);
        std::vector<uint8_t> got(n, 0xAA);
        tcp::exchange(&me.mesh->pair(to), out.data(), n, &me.mesh->pair(from), got.data(), n, tag, in(milliseconds(20000)),
                      me.abort.get());
        if (got != pattern(n, seed + from * 131 + r)) throw std::runtime_error("corrupt data from rank " + std::to_string(from));
      }
    }
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(err[r], "") << "rank " << r;
}

// One batch per rank: two messages to every other rank (sizes beyond the socket buffers, so
// no rank can finish its sends before the others receive) and two from each, posted in a
// different order on every rank. Every message arrives intact, in its order on its pair.
TEST(TcpTransport, BatchOfManyMessagesOnManyPairsProgressesTogether) {
  const int world = 4;
  Group g;
  uint32_t seed = std::random_device{}();
  auto err = on_ranks(g, world, [&](Rank& me) {
    int r = me.bs->rank();
    const size_t sizes[2] = {(size_t{3} << 20) + 5, 7};  // a big one, then a small one behind it
    std::vector<std::vector<uint8_t>> out, got;
    std::vector<tcp::Transfer> xs;
    out.reserve(2 * world);
    got.reserve(2 * world);
    for (int k = 1; k < world; ++k) {
      int to = (r + k) % world, from = (r + world - k) % world;
      for (int m = 0; m < 2; ++m) {
        out.push_back(pattern(sizes[m], seed + r * 131 + to * 7 + m));
        got.emplace_back(sizes[m], 0xAA);
        tcp::Transfer s{&me.mesh->pair(to), true, out.back().data(), sizes[m], 40u + m};
        tcp::Transfer v{&me.mesh->pair(from), false, got.back().data(), sizes[m], 40u + m};
        // Odd ranks post their receives first: the order across pairs must not matter.
        if (r % 2) xs.insert(xs.end(), {v, s});
        else xs.insert(xs.end(), {s, v});
      }
    }
    tcp::transfer(xs, in(milliseconds(30000)), me.abort.get());
    size_t i = 0;
    for (int k = 1; k < world; ++k) {
      int from = (r + world - k) % world;
      for (int m = 0; m < 2; ++m, ++i)
        if (got[i] != pattern(sizes[m], seed + from * 131 + r * 7 + m))
          throw std::runtime_error("corrupt or reordered message " + std::to_string(m) + " from rank " + std::to_string(from));
    }
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(err[r], "") << "rank " << r;
}

TEST(TcpTransport, MismatchedSizeOrTagIsNamedBeforeThePayloadIsRead) {
  Group g;
  auto err = on_ranks(g, 2, [&](Rank& me) {
    int r = me.bs->rank();
    tcp::Pair& p = me.mesh->pair(1 - r);
    if (r == 0) {
      std::vector<uint8_t> big(4096, 1);
      p.send(big.data(), big.size(), 7, in(milliseconds(5000)), me.abort.get());
    } else {
      std::vector<uint8_t> small(100, 0xEE);
      try {
        p.recv(small.data(), small.size(), 7, in(milliseconds(5000)), me.abort.get());
      } catch (const InvalidArgument& e) {
        // Nothing of the 4096-byte payload may have landed in the 100-byte buffer.
        for (uint8_t b : small)
          if (b != 0xEE) throw std::runtime_error("payload written into a buffer too small for it");
        // The pair stays broken with the same cause.
        try {
          p.recv(small.data(), small.size(), 8, in(milliseconds(100)), me.abort.get());
        } catch (const InvalidArgument& again) {
          throw std::runtime_error(std::string("OK ") + e.what() + " | " + again.what());
        }
      }
    }
  });
  EXPECT_EQ(err[0], "");
  EXPECT_EQ(err[1].rfind("OK ", 0), 0u) << err[1];
  EXPECT_NE(err[1].find("rank 1: rank 0 sent a message of 4096 bytes (tag 7) where 100 bytes (tag 7)"), std::string::npos)
      << err[1];
}

// Ranks on different nodes that disagree on a collective: the frame carries the sender's call
// descriptor, so the receiver names both calls (not only sizes and tags) and the sender as the
// culprit, before a payload byte lands; equal sizes and tags (an op or a dtype of the same width)
// are caught too.
TEST(TcpTransport, DifferentCallsAreNamedFromTheFrameHeader) {
  Group g;
  int culprit = -2;
  auto err = on_ranks(g, 2, [&](Rank& me) {
    int r = me.bs->rank();
    tcp::Pair& p = me.mesh->pair(1 - r);
    CollArgs a;
    a.coll = Collective::AllReduce;
    a.count = 64;
    a.dtype = DataType::Float32;
    a.op = r == 0 ? RedOp::Max : RedOp::Sum;
    std::vector<uint8_t> buf(256, 0xEE);
    if (r == 0) {
      p.send(buf.data(), buf.size(), 9, in(milliseconds(5000)), me.abort.get(), CallDesc::of(a));
      return;
    }
    try {
      p.recv(buf.data(), buf.size(), 9, in(milliseconds(5000)), me.abort.get(), CallDesc::of(a));
    } catch (const InvalidArgument& e) {
      culprit = e.culprit();
      for (uint8_t b : buf)
        if (b != 0xEE) throw std::runtime_error("payload written although the calls differ");
      throw;
    }
  });
  EXPECT_EQ(err[0], "");
  EXPECT_EQ(culprit, 0);
  EXPECT_NE(err[1].find("rank 1: mismatched collectives: rank 0 called all_reduce(count=64, float32, max), rank 1 "
                        "called all_reduce(count=64, float32, sum)"),
            std::string::npos)
      << err[1];
}

TEST(TcpTransport, SilentPeerTimesOutNamingIt) {
  Group g;
  auto err = on_ranks(g, 2, [&](Rank& me) {
    int r = me.bs->rank();
    if (r == 1) {
      uint32_t x = 0;
      auto t0 = steady_clock::now();
      try {
        me.mesh->pair(0).recv(&x, sizeof(x), 1, in(milliseconds(300)), me.abort.get());
      } catch (const TimeoutError& e) {
        auto ms = duration_cast<milliseconds>(steady_clock::now() - t0).count();
        if (ms < 250 || ms > 2000) throw std::runtime_error("timed out after " + std::to_string(ms) + " ms");
        if (e.culprit() != 0) throw std::runtime_error("culprit " + std::to_string(e.culprit()) + ", not rank 0");
        throw;
      }
    }
  });
  EXPECT_EQ(err[0], "");
  EXPECT_NE(err[1].find("rank 1: timed out after"), std::string::npos) << err[1];
  EXPECT_NE(err[1].find("waiting for rank 0 (127.0.0.1:"), std::string::npos) << err[1];
}

TEST(TcpTransport, PeerThatLeavesIsNamedAsCulprit) {
  Group g;
  std::atomic<bool> left{false};
  int culprit = -2;
  auto err = on_ranks(g, 2, [&](Rank& me) {
    int r = me.bs->rank();
    if (r == 0) {
      me.mesh.reset();  // closes its sockets: what a dead process's kernel does
      left = true;
      return;
    }
    while (!left) std::this_thread::sleep_for(milliseconds(1));
    std::vector<uint8_t> buf(1 << 20);
    try {
      me.mesh->pair(0).recv(buf.data(), buf.size(), 3, in(milliseconds(5000)), me.abort.get());
    } catch (const RemoteError& e) {
      culprit = e.culprit();
      throw;
    }
  });
  EXPECT_EQ(err[0], "");
  EXPECT_EQ(culprit, 0);
  EXPECT_NE(err[1].find("rank 1: TCP connection with rank 0 (127.0.0.1:"), std::string::npos) << err[1];
}

TEST(TcpTransport, AbortStopsAWaitPromptly) {
  Group g;
  auto err = on_ranks(g, 2, [&](Rank& me) {
    int r = me.bs->rank();
    if (r == 1) {
      std::thread raiser([&] {
        std::this_thread::sleep_for(milliseconds(100));
        me.abort->raise(0, ErrorCode::Remote, "rank 0 aborted (test)");
      });
      uint32_t x = 0;
      auto t0 = steady_clock::now();
      try {
        me.mesh->pair(0).recv(&x, sizeof(x), 1, in(milliseconds(20000)), me.abort.get());
      } catch (const Error&) {
        raiser.join();
        if (steady_clock::now() - t0 > milliseconds(1000)) throw std::runtime_error("abort took over 1 s to be seen");
        throw;
      }
      raiser.join();
    }
  });
  EXPECT_NE(err[1].find("rank 0 aborted (test)"), std::string::npos) << err[1];
}

// The group's token and a stranger's, differing in one byte.
struct Tokens {
  wire::Token tok{}, wrong{};
  explicit Tokens(uint8_t seed) {
    tok[0] = seed;
    wrong = tok;
    wrong[3] = static_cast<uint8_t>(seed + 1);
  }
};

// Strangers on the port (garbage, a wrong token, a silent connection, a duplicate of a rank
// already connected) are turned away; the genuine peer still gets through.
TEST(TcpListener, RejectsStrangersAndAcceptsThePeer) {
  const Tokens tokens(42);  // members named, not bound: clang cannot capture a structured binding in a lambda
  const auto& tok = tokens.tok;
  const auto& wrong = tokens.wrong;
  tcp::Listener l("127.0.0.1");
  auto raw = [&] {
    net::Fd fd = net::connect_with_retry(l.address(), in(milliseconds(2000)), nullptr, 9);
    return fd;
  };
  auto say = [&](net::Fd& fd, const tcp::Hello& h) {
    auto b = tcp::encode(h);
    ASSERT_EQ(net::send_all(fd.get(), b.data(), b.size(), in(milliseconds(2000))).status, net::IoStatus::Ok);
  };
  std::map<int, net::Fd> got;
  std::string error;
  std::thread acceptor([&] {
    try {
      got = l.accept(tok, 0, 3, {1, 2}, in(milliseconds(5000)), nullptr);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  net::Fd garbage = raw();
  std::string junk(64, 'x');
  net::send_all(garbage.get(), junk.data(), junk.size(), in(milliseconds(1000)));
  net::Fd silent = raw();
  net::Fd imposter = raw();
  say(imposter, tcp::Hello{wrong, 1, 0, 3});
  net::Fd good1 = raw();
  say(good1, tcp::Hello{tok, 1, 0, 3});
  std::this_thread::sleep_for(milliseconds(200));
  net::Fd dup1 = raw();
  say(dup1, tcp::Hello{tok, 1, 0, 3});
  net::Fd good2 = raw();
  say(good2, tcp::Hello{tok, 2, 0, 3});
  acceptor.join();
  ASSERT_EQ(error, "");
  ASSERT_EQ(got.size(), 2u);
  // The accepted ones hear the listener's hello back; the imposter hears nothing but EOF.
  uint8_t answer[tcp::kHelloBytes];
  ASSERT_EQ(net::recv_all(good1.get(), answer, sizeof(answer), in(milliseconds(2000))).status, net::IoStatus::Ok);
  std::string why;
  auto h = tcp::decode_hello(answer, &why);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(tcp::check_hello(*h, tok, 1, 3), "");
  EXPECT_EQ(h->from_rank, 0);
  EXPECT_EQ(net::recv_all(imposter.get(), answer, sizeof(answer), in(milliseconds(2000))).status, net::IoStatus::Closed);
  EXPECT_EQ(net::recv_all(dup1.get(), answer, sizeof(answer), in(milliseconds(2000))).status, net::IoStatus::Closed);
}

TEST(TcpListener, MissingPeersAreNamedOnTimeout) {
  wire::Token tok{};
  tcp::Listener l("127.0.0.1");
  try {
    l.accept(tok, 0, 4, {1, 3}, in(milliseconds(200)), nullptr);
    FAIL() << "accept returned without peers";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0: TCP transport connections from rank(s) 1, 3 did not arrive"), std::string::npos)
        << e.what();
  }
}

namespace {
int open_fd_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}
}  // namespace

// The data-port listener between nodes has the root's protections, through the
// same StrangerGate: 150 silent connections are capped at 64 held (the oldest dropped), 40
// wrong-token hellos write at most 5 lines (the next, 10 s on, says how many were held back), and the
// genuine peer still gets in at once. Before: every stranger held a descriptor until its
// 5 s hello timeout, and each rejection wrote a WARN line.
TEST(TcpListener, StrangersAreCappedAndRateLimitedAndThePeerStillGetsIn) {
  const Tokens tokens(7);  // members named, not bound: clang cannot capture a structured binding in a lambda
  const auto& tok = tokens.tok;
  const auto& wrong = tokens.wrong;
  tcp::Listener l("127.0.0.1");
  const int before = open_fd_count();
  std::map<int, net::Fd> got;
  std::string error;
  testing::internal::CaptureStderr();
  auto t0 = steady_clock::now();
  std::thread acceptor([&] {
    try {
      got = l.accept(tok, 0, 2, {1}, in(milliseconds(8000)), nullptr);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::vector<net::Fd> strangers;
  for (int i = 0; i < 150; ++i)
    strangers.push_back(net::connect_with_retry(l.address(), in(milliseconds(2000)), nullptr, 9));
  std::this_thread::sleep_for(milliseconds(300));
  // Our 150 ends plus the listener's held ones: bounded by the cap, not by the strangers.
  const int held = open_fd_count() - before - 150;
  for (int i = 0; i < 40; ++i) {
    net::Fd fd = net::connect_with_retry(l.address(), in(milliseconds(2000)), nullptr, 9);
    auto b = tcp::encode(tcp::Hello{wrong, 1, 0, 2});
    net::send_all(fd.get(), b.data(), b.size(), in(milliseconds(1000)));
    strangers.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(milliseconds(200));
  net::Fd good = net::connect_with_retry(l.address(), in(milliseconds(2000)), nullptr, 9);
  auto b = tcp::encode(tcp::Hello{tok, 1, 0, 2});
  ASSERT_EQ(net::send_all(good.get(), b.data(), b.size(), in(milliseconds(2000))).status, net::IoStatus::Ok);
  acceptor.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got.size(), 1u);
  EXPECT_LT(steady_clock::now() - t0, milliseconds(5000));
  EXPECT_LE(held, 64 + 8) << "the listener held more connections than the cap";
  int lines = 0;
  for (size_t p = err.find("TCP transport listener"); p != std::string::npos; p = err.find("TCP transport listener", p + 1))
    ++lines;
  EXPECT_LE(lines, 5) << err;
}
