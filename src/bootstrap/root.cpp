// RootServer's lifetime (the thread, its wake-up pipe) and the process-wide registry of the roots
// this process hosts. The server itself: root_state.hpp (state, limits), root_admission.cpp,
// root_group.cpp, root_io.cpp.
#include "bootstrap/root.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "actorcc/error.hpp"
#include "bootstrap/root_state.hpp"
#include "common/log.hpp"

namespace actorcc::bootstrap {

using root_detail::same_token;

RootServer::RootServer(net::Fd listener, const wire::Token& token, int expected_world, std::optional<RunId> run_id)
    : impl_(std::make_unique<Impl>(std::move(listener), token, expected_world, std::move(run_id))) {
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) throw SystemError(std::string("pipe2(): ") + std::strerror(errno));
  impl_->wake_r.reset(p[0]);
  impl_->wake_w.reset(p[1]);
  thread_ = std::thread([this] {
    try {
      impl_->run();
    } catch (const std::exception& e) {
      LOG_ERROR("actorcc root " << impl_->where << ": stopped by an internal error: " << e.what());
    }
    // Close every socket now: the port frees, and clients still connected see the root go.
    impl_->conns.clear();
    impl_->listener.reset();
    impl_->release_pending();  // the group is over: nothing it held outlives it
    finished_.store(true, std::memory_order_release);
  });
}

bool RootServer::in_use() const { return impl_->admitted_any.load(std::memory_order_acquire); }
const wire::Token& RootServer::token() const { return impl_->token; }

void RootServer::stop() {
  impl_->stop.store(true, std::memory_order_release);
  char b = 1;
  ssize_t ignored = ::write(impl_->wake_w.get(), &b, 1);  // full pipe: a wake-up is already pending
  (void)ignored;
}

RootServer::~RootServer() {
  stop();
  if (thread_.joinable()) thread_.join();
}

namespace {

class RootRegistry {
 public:
  static RootRegistry& instance() {
    static RootRegistry r;
    return r;
  }
  void add(std::unique_ptr<RootServer> s) {
    std::vector<std::unique_ptr<RootServer>> reaped;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (forked()) abandon_inherited();
      // Free roots whose groups are over, so a long-lived process does not collect threads.
      for (auto& r : roots_)
        if (r->finished()) reaped.push_back(std::move(r));
      std::erase(roots_, nullptr);
      roots_.push_back(std::move(s));
    }
  }
  // Stops (and joins) the root serving `token` if no rank has joined it; true if one stopped.
  bool stop_unused(const wire::Token& token) {
    std::unique_ptr<RootServer> victim;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (forked()) abandon_inherited();
      for (auto& r : roots_)
        if (r && same_token(r->token(), token) && !r->in_use() && !r->finished()) {
          victim = std::move(r);
          break;
        }
      std::erase(roots_, nullptr);
    }
    return victim != nullptr;  // ~RootServer stops and joins, outside the lock
  }
  bool hosts(const wire::Token& token) {
    std::lock_guard<std::mutex> g(mu_);
    if (forked()) abandon_inherited();
    for (auto& r : roots_)
      if (r && same_token(r->token(), token) && !r->finished()) return true;
    return false;
  }
  ~RootRegistry() {
    std::lock_guard<std::mutex> g(mu_);
    if (forked()) abandon_inherited();
    for (auto& r : roots_) r->stop();
    roots_.clear();  // joins
  }

 private:
  // A child forked after a root started (a launcher that creates the id, then forks ranks)
  // inherits these objects but not their threads: stopping or joining them there would write
  // to the parent's wake pipe and join a thread that does not exist. Leak them instead.
  bool forked() const { return ::getpid() != owner_; }
  void abandon_inherited() {
    for (auto& r : roots_) (void)r.release();
    roots_.clear();
    owner_ = ::getpid();
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<RootServer>> roots_;
  pid_t owner_ = ::getpid();
};

}  // namespace

void launch_root(net::Fd listener, const wire::Token& token, int expected_world, std::optional<RunId> run_id) {
  keep_root(std::make_unique<RootServer>(std::move(listener), token, expected_world, std::move(run_id)));
}

void keep_root(std::unique_ptr<RootServer> server) { RootRegistry::instance().add(std::move(server)); }

bool hosts_root(const wire::Token& token) { return RootRegistry::instance().hosts(token); }

bool stop_root_if_unused(const wire::Token& token) { return RootRegistry::instance().stop_unused(token); }

}  // namespace actorcc::bootstrap
