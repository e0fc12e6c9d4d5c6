// The rank side of the bootstrap: one TCP connection to the root, a reader thread that
// receives every frame from it, and callers that wait on a condition variable for results.
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"

namespace actorcc::bootstrap {

class BootstrapClient final : public Bootstrap {
 public:
  // State shared with the reader thread and with the AbortSignal listener (which may outlive
  // this object, hence shared ownership and a weak reference from the listener).
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, std::vector<std::string>> results;
    std::map<uint64_t, wire::StatusReply> status;
    std::set<uint64_t> abandoned;  // sequence numbers whose caller gave up (timeout/abort)
    bool reader_done = false;      // the reader thread has returned (EOF at close)
  };

  BootstrapClient(net::Fd fd, int rank, int world, std::vector<std::string> blobs, std::shared_ptr<AbortSignal> abort,
                  std::string root_addr, int root_rank);
  ~BootstrapClient() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  const std::vector<std::string>& peer_blobs() const override { return blobs_; }
  std::vector<std::string> allgather(const std::string& blob, Deadline deadline) override;
  void barrier(Deadline deadline) override;
  void abort(const std::string& reason, int culprit = -1) override;
  void on_departure(std::function<void(const Departure&)> listener) override;
  void set_collectives(uint64_t n) override { collectives_.store(n, std::memory_order_relaxed); }
  void set_root_host(int rank) override {
    if (rank >= 0 && rank < world_) root_rank_.store(rank, std::memory_order_relaxed);
  }

  // Test hook: drops the connection the way a crashed process would (no BYE), so the other
  // ranks' failure detection can be tested inside one process.
  void drop_connection_for_test();

 private:
  std::vector<std::string> gather(const std::string& blob, Deadline deadline, const char* what);
  std::string ask_missing(uint64_t seq, int* first_missing);
  void read_loop();
  [[noreturn]] void fail_root_lost(const std::string& why);

  net::Fd fd_;
  const int rank_, world_;
  const std::vector<std::string> blobs_;
  const std::shared_ptr<AbortSignal> abort_;
  const std::string root_addr_;
  // The rank hosting the root (0 on the from_address path and in a shrunk group; a grown group's
  // from the peer blobs: set_root_host), else -1. Read by the reader thread.
  std::atomic<int> root_rank_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::mutex send_mu_;  // one frame at a time, sequence numbers in send order
  std::mutex departures_mu_;  // departures_ and listener_, between the reader and the owner
  std::vector<Departure> departures_;
  std::function<void(const Departure&)> listener_;
  std::atomic<uint64_t> collectives_{0};  // for this rank's BYE
  uint64_t next_seq_ = 0;
  bool abort_sent_ = false;
  // The reader raised the AbortSignal from a frame of the root (another rank's abort, a lost
  // rank): the root told every rank, so this rank's goodbye need not carry the cause.
  std::atomic<bool> told_by_root_{false};
  std::atomic<bool> closing_{false};
  bool dropped_ = false;
  std::thread reader_;
};

}  // namespace actorcc::bootstrap
