// Communicator: its calls. Each one checks the communicator is usable here and now, validates its
// arguments, then hands the call to the backend; the forming of the group is in build.cpp, the
// suspension of its memory in suspend.cpp.
#include "actorcc/communicator.hpp"

#include <string>
#include <utility>

#include "common/text.hpp"
#include "core/build.hpp"
#include "core/checked_mode.hpp"
#include "core/communicator_impl.hpp"
#include "core/validate.hpp"

namespace actorcc {

const char* version() noexcept { return ACTORCC_VERSION; }

Communicator::Impl::~Impl() {
  if (!in_creator()) {
    // A fork child: no BYE, no shutdown() of the parent's sockets, no unlink, no join of
    // threads that exist only in the parent. The kernel closes the child's copies of the
    // descriptors at exit, which the parent's keep open.
    (void)backend.release();
    (void)bootstrap.release();
    return;
  }
  backend.reset();  // backends may still use the bootstrap while tearing down
  if (bootstrap) {
    bootstrap->set_collectives(departures.issued());
    bootstrap.reset();  // says goodbye to the root (and stops the departure listener)
  }
}

void Communicator::Impl::check_process() const {
  if (in_creator()) return;
  throw UnsupportedError(cat("this communicator was created by process ", creator, " and cannot be used from process ",
                             ::getpid(),
                             " (a fork() child): its connections belong to the parent, which stays the rank; "
                             "build a new communicator in the child instead"),
                         ctx.rank, ctx.rank);
}

void Communicator::Impl::refuse_if_suspended() const {
  if (suspended.load())
    throw UnsupportedError("the communicator is suspended (suspend() released its memory): call resume() on every "
                           "rank before any other call",
                           ctx.rank);
}

Options Communicator::Impl::next_options(std::chrono::milliseconds join_timeout) const {
  Options o = ctx.options;
  o.backend = backend->kind();
  if (join_timeout.count() > 0) o.join_timeout = join_timeout;
  return o;
}

void Communicator::Impl::revoke(const std::string& why, bool tell_group) {
  if (abort->raised()) return;  // aborted already: its calls fail with the first cause
  if (tell_group) bootstrap->abort(why);
  else abort->raise(ctx.rank, ErrorCode::Remote, why);
}

void Communicator::Impl::refuse(const InvalidArgument& e) {
  check_process();
  if (ctx.world > 1) ctx.abort_group("it refused a call with a bad argument: " + e.message(), e.culprit());
  throw e;
}

void Communicator::Impl::run(const CollArgs& a) {
  check_usable();  // a call while suspended is refused before anything else
  try {
    validate_args(a, ctx.rank, ctx.world);
    if (ctx.options.checked) check_matching(ctx, a);
    departures.enter(a);
    backend->run(a);
  } catch (const InvalidArgument& e) {
    refuse(e);
  }
}

Communicator::Communicator(const UniqueId& id, int rank, int world_size, const Options& options)
    : impl_(build(id, rank, world_size, options)) {}

std::unique_ptr<Communicator> Communicator::from_address(const std::string& host, uint16_t port, int rank,
                                                         int world_size, const Options& options) {
  UniqueId id = address_unique_id(host, port, world_size);
  if (rank == 0) start_root_for(id);
  return std::make_unique<Communicator>(id, rank, world_size, options);
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

void Communicator::refuse_join(const UniqueId& id, int rank, int world_size, const std::string& reason,
                               std::chrono::milliseconds join_timeout) noexcept {
  Bootstrap::refuse(id, rank, world_size, reason, Deadline::after(join_timeout));
}

Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::shrink(const std::vector<int>& exclude, std::chrono::milliseconds join_timeout) {
  Impl& me = *impl_;
  // The ranks this group's root reported lost are excluded too: never waited for.
  elastic::ShrinkPlan p = elastic::plan_shrink(*me.member, me.ctx.rank, me.ctx.world, exclude, me.abort->lost());
  std::unique_ptr<Impl> next;
  Options o = me.next_options(join_timeout);
  elastic::join_shrunk(p, me.ctx.rank, o.join_timeout, *me.abort,
                       [&](std::chrono::milliseconds left, std::shared_ptr<AbortSignal> sig) {
                         o.join_timeout = left;
                         next = build(p.id, p.new_rank, static_cast<int>(p.survivors.size()), o, p.digest,
                                      std::move(sig));
                       });
  elastic::finish_shrink(*me.member, p);
  me.revoke(elastic::revoke_reason(p), p.new_rank == 0);
  return std::unique_ptr<Communicator>(new Communicator(std::move(next)));
}

UniqueId Communicator::grow_id() const { return elastic::grow_id(*impl_->member); }

std::unique_ptr<Communicator> Communicator::grow(int new_world, const std::optional<UniqueId>& id, int new_rank,
                                                 std::chrono::milliseconds join_timeout) {
  Impl& me = *impl_;
  me.check_usable();
  auto [gid, r] = elastic::agree_grow(*me.bootstrap, me.ctx.rank, me.ctx.world, new_world, id, new_rank,
                                      Deadline::after(me.ctx.options.timeout));
  return std::unique_ptr<Communicator>(new Communicator(build(gid, r, new_world, me.next_options(join_timeout))));
}

int Communicator::rank() const noexcept { return impl_->ctx.rank; }
int Communicator::world_size() const noexcept { return impl_->ctx.world; }
Backend Communicator::backend() const noexcept { return impl_->backend->kind(); }
int Communicator::device() const noexcept { return impl_->backend->device(); }
const std::vector<PeerInfo>& Communicator::peers() const noexcept { return impl_->ctx.peers; }
int Communicator::num_nodes() const noexcept { return impl_->ctx.num_nodes; }

void Communicator::all_reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, Stream stream) {
  impl_->run({Collective::AllReduce, send, recv, count, dtype, op, 0, stream});
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype, RedOp op,
                                  Stream stream) {
  impl_->run({Collective::ReduceScatter, send, recv, recv_count, dtype, op, 0, stream});
}
void Communicator::all_gather(const void* send, void* recv, size_t send_count, DataType dtype, Stream stream) {
  impl_->run({Collective::AllGather, send, recv, send_count, dtype, RedOp::Sum, 0, stream});
}
void Communicator::broadcast(const void* send, void* recv, size_t count, DataType dtype, int root, Stream stream) {
  impl_->run({Collective::Broadcast, send, recv, count, dtype, RedOp::Sum, root, stream});
}
void Communicator::barrier(Stream stream) {
  impl_->run({Collective::Barrier, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum, 0, stream});
}

void Communicator::send(const void* buf, size_t count, DataType dtype, int peer, Stream stream) {
  CollArgs a{Collective::Send, buf, nullptr, count, dtype, RedOp::Sum, 0, stream};
  a.peer = peer;
  impl_->run(a);
}
void Communicator::recv(void* buf, size_t count, DataType dtype, int peer, Stream stream) {
  CollArgs a{Collective::Recv, nullptr, buf, count, dtype, RedOp::Sum, 0, stream};
  a.peer = peer;
  impl_->run(a);
}
void Communicator::send_recv(const std::vector<P2POp>& ops, Stream stream) {
  CollArgs a{Collective::SendRecv, nullptr, nullptr, 0, DataType::Float32, RedOp::Sum, 0, stream};
  a.ops = ops.data();
  a.num_ops = ops.size();
  impl_->run(a);
}
void Communicator::all_to_all(const void* send, void* recv, size_t count, DataType dtype, Stream stream) {
  impl_->run({Collective::AllToAll, send, recv, count, dtype, RedOp::Sum, 0, stream});
}
void Communicator::all_to_all_v(const void* send, const std::vector<size_t>& send_counts, void* recv,
                                const std::vector<size_t>& recv_counts, DataType dtype, Stream stream) {
  const auto w = static_cast<size_t>(world_size());
  if (send_counts.size() != w || recv_counts.size() != w)
    refuse_call(InvalidArgument(cat("all_to_all_v: send_counts has ", send_counts.size(), " entries and recv_counts ",
                                    recv_counts.size(), "; both need world_size = ", w),
                                rank()));
  CollArgs a{Collective::AllToAllV, send, recv, 0, dtype, RedOp::Sum, 0, stream};
  a.send_counts = send_counts.data();
  a.recv_counts = recv_counts.data();
  impl_->run(a);
}
void Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                          Stream stream) {
  impl_->run({Collective::Reduce, send, recv, count, dtype, op, root, stream});
}
void Communicator::gather(const void* send, void* recv, size_t send_count, DataType dtype, int root, Stream stream) {
  impl_->run({Collective::Gather, send, recv, send_count, dtype, RedOp::Sum, root, stream});
}
void Communicator::scatter(const void* send, void* recv, size_t recv_count, DataType dtype, int root, Stream stream) {
  impl_->run({Collective::Scatter, send, recv, recv_count, dtype, RedOp::Sum, root, stream});
}

void Communicator::register_buffer(void* ptr, size_t bytes) {
  impl_->check_usable();
  if (!ptr || bytes == 0) throw InvalidArgument("register_buffer: null pointer or zero size", rank());
  impl_->backend->register_buffer(ptr, bytes);
}
void Communicator::deregister_buffer(void* ptr) {
  impl_->check_process();
  impl_->refuse_if_suspended();
  impl_->backend->deregister_buffer(ptr);
}

std::vector<std::string> Communicator::allgather_bytes(const std::string& blob) {
  impl_->check_usable();
  return impl_->bootstrap->allgather(blob, Deadline::after(impl_->ctx.options.timeout));
}
void Communicator::host_barrier() {
  impl_->check_usable();
  impl_->bootstrap->barrier(Deadline::after(impl_->ctx.options.timeout));
}

// While suspended nothing is queued: both report the group's state alone (a watchdog that polls,
// as torch's does through ncclCommGetAsyncError, must not read the suspension as an error).
void Communicator::check() {
  impl_->check_process();
  if (impl_->suspended.load()) return impl_->abort->throw_if_raised();
  impl_->backend->poll_errors();
  impl_->check_usable();
}
void Communicator::synchronize(Stream stream) {
  impl_->check_process();
  if (impl_->suspended.load()) return impl_->abort->throw_if_raised();
  impl_->backend->synchronize(stream);
  impl_->check_usable();
}

MemoryStats Communicator::mem_stats() const {
  impl_->check_process();
  MemoryStats m = impl_->backend->memory();
  m.suspended = impl_->suspended.load();
  return m;
}

void Communicator::abort(const std::string& reason) {
  impl_->check_process();
  impl_->bootstrap->abort(reason);
}
bool Communicator::aborted() const noexcept { return impl_->abort->raised(); }
void Communicator::refuse_call(const InvalidArgument& error) { impl_->refuse(error); }

std::string Communicator::plan(Collective c, size_t bytes, bool registered_output) const {
  return impl_->backend->plan(c, bytes, registered_output);
}

std::vector<std::pair<std::string, double>> Communicator::setup_ms() const { return impl_->backend->setup_ms(); }

}  // namespace actorcc
