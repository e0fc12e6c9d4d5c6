// The root server of one bootstrap group: a single poll()-driven thread in the hosting process
// that admits ranks (token, version, world, rank checks), hands out the peer table, runs the
// small all-gathers, forwards aborts and reports ranks that vanish.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "bootstrap/run_id.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"

namespace actorcc::bootstrap {

class RootServer {
 public:
  // Takes a listening socket and serves the group authenticated by `token` on a new thread.
  // `expected_world` > 0 (the from_address id carries it) refuses a HELLO of another world
  // size; 0 lets the first admitted HELLO fix it. `run_id` (the from_address path: rank 0's)
  // refuses a HELLO of another run; where it is empty (no launcher names the run) the group is
  // welcomed no sooner than kClaimWindow after the root began listening, so that a second launch
  // on the address started as close shows itself (a duplicate claim, a second root) before any
  // rank has the peer table. Without it, run ids are not compared.
  RootServer(net::Fd listener, const wire::Token& token, int expected_world = 0,
             std::optional<RunId> run_id = std::nullopt);
  ~RootServer();  // stops and joins the thread
  RootServer(const RootServer&) = delete;
  RootServer& operator=(const RootServer&) = delete;

  void stop();
  // True once every rank of a formed (or failed) group has left and the thread has ended.
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // True once a rank has been admitted (an unused root may be stopped when its id is dropped).
  bool in_use() const;
  const wire::Token& token() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

// Starts a root on `listener` and keeps it in a process-wide registry. The registry is a
// function-local static: at process exit its destructor stops and joins every root still
// running, so a root never blocks exit and never outlives the statics it uses.
void launch_root(net::Fd listener, const wire::Token& token, int expected_world = 0,
                 std::optional<RunId> run_id = std::nullopt);

// Keeps a root started elsewhere in the same registry (a shrunk group's root, on the socket a
// survivor reserved for it: core/elastic.cpp).
void keep_root(std::unique_ptr<RootServer> server);

// True while this process runs a root serving `token` (the caller of UniqueId::create() or
// grow_id(), when it joins the group it made: the group learns that this rank hosts its root).
bool hosts_root(const wire::Token& token);

// Stops the root this process runs for `token` if no rank has joined it yet (its thread ends,
// its port and descriptors close); false if there is none or it is in use.
bool stop_root_if_unused(const wire::Token& token);

}  // namespace actorcc::bootstrap
