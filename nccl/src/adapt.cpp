// Which NCCL reductions need adapting, and how: a plan of (pass before, native collective,
// pass after) per dtype and op, then its run on the call's buffers (docs/nccl-types.md).
#include <algorithm>
#include <limits>
#include <string>

#include "adapt_state.hpp"

namespace actorcc::ncclabi {
namespace {

const char* type_name(int t) {
  static const char* const names[kNumTypes] = {
      "ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",   "ncclInt64",      "ncclUint64",
      "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return t >= 0 && t < kNumTypes ? names[t] : "an unknown ncclDataType_t";
}

// The core's type of the same width: unsigned 32/64-bit run as signed, whose wrapping sum and
// product are the same bits.
DataType core_type(int t) {
  switch (t) {
    case kInt8: return DataType::Int8;
    case kUint8: return DataType::UInt8;
    case kInt32: case kUint32: return DataType::Int32;
    case kInt64: case kUint64: return DataType::Int64;
    case kFloat16: return DataType::Float16;
    case kFloat32: return DataType::Float32;
    case kFloat64: return DataType::Float64;
    default: return DataType::BFloat16;
  }
}

RedOp core_op(int op) {
  switch (op) {
    case kSum: return RedOp::Sum;
    case kProd: return RedOp::Prod;
    case kMax: return RedOp::Max;
    case kMin: return RedOp::Min;
    default: return RedOp::Avg;
  }
}

[[noreturn]] void refuse(Communicator& c, const std::string& why) { c.refuse_call(InvalidArgument(why, c.rank())); }

// What runs: `pre` turns the input into the core's type (into recv or scratch), the core reduces
// with `op` on `dtype`, `post` turns the result back (into recv). Either pass may be absent.
struct Plan {
  DataType dtype = DataType::Float64;
  RedOp op = RedOp::Sum;
  bool has_pre = false, has_post = false;
  Xform pre, post;
};

// False: the core takes the call as it is.
bool make_plan(Communicator& c, AdaptState& st, const ReduceCall& call, Plan& p) {
  const int t = call.dtype;
  if (t < 0 || t >= kNumTypes)
    refuse(c, "ncclDataType_t " + std::to_string(t) + " is not a datatype NCCL defines (0-11)");
  const bool fp8 = t == kFloat8e4m3 || t == kFloat8e5m2;
  const bool uns = t == kUint32 || t == kUint64;
  if (call.op < 0) refuse(c, "ncclRedOp_t " + std::to_string(call.op) + " is not a reduction op");
  if (call.op >= kNumOps) {  // a PreMulSum handle: scale each rank's input, then a native sum
    PremulOp op;
    {
      std::lock_guard<std::mutex> lk(st.mu);
      const auto it = st.ops.find(call.op);
      if (it == st.ops.end())
        refuse(c, "ncclRedOp_t " + std::to_string(call.op) +
                      " is not a live PreMulSum op of this communicator (destroyed by ncclRedOpDestroy, made "
                      "by another communicator, or never made)");
      op = it->second;
    }
    if (op.dtype != t)
      refuse(c, "PreMulSum op " + std::to_string(call.op) + " was made for " + type_name(op.dtype) +
                    " but the call's datatype is " + type_name(t));
    p.op = RedOp::Sum;
    p.has_pre = true;
    p.pre.type = t;
    p.pre.scaled = true;
    p.pre.scalar = op.scalar;
    p.pre.scalar_ptr = op.scalar_ptr;
    if (fp8) {  // widen to float64 times the scalar (exact), sum exactly, round once
      p.dtype = DataType::Float64;
      p.pre.kind = XformKind::Up;
      p.has_post = true;
      p.post.kind = XformKind::Down;
      p.post.type = t;
    } else {
      p.dtype = core_type(t);
      p.pre.kind = XformKind::Scale;
    }
    return true;
  }
  // Integer avg: NCCL sums in the type (wrapping) and then divides, where the core's avg sums
  // exactly in 64 bits; the two differ once a sum overflows the type (nccl-tests checks NCCL's).
  const bool int_avg = call.op == kAvg && t != kFloat16 && t != kFloat32 && t != kFloat64 && t != kBfloat16 && !fp8;
  if (!fp8 && !int_avg && !(uns && (call.op == kMax || call.op == kMin))) return false;
  p.op = core_op(call.op);
  p.pre.type = p.post.type = t;
  if (fp8) {
    // Min/max only compare: float16 holds every fp8 value. Sum, prod and avg run in float64,
    // where sums of fp8 values are exact (docs/nccl-types.md gives the bounds).
    const bool minmax = call.op == kMin || call.op == kMax;
    p.dtype = minmax ? DataType::Float16 : DataType::Float64;
    p.has_pre = p.has_post = true;
    p.pre.kind = XformKind::Up;
    p.post.kind = XformKind::Down;
    p.pre.wide_f64 = p.post.wide_f64 = !minmax;
  } else if (call.op == kAvg) {  // NCCL sums in the type (wrapping), then divides
    p.dtype = core_type(t);
    p.op = RedOp::Sum;
    p.has_post = true;
    p.post.kind = (t == kInt8 || t == kInt32 || t == kInt64) ? XformKind::SDiv : XformKind::UDiv;
    p.post.divisor = static_cast<uint64_t>(c.world_size());
  } else {  // unsigned min/max: flipping the sign bit maps unsigned order onto signed order
    p.dtype = core_type(t);
    p.has_pre = p.has_post = true;
    p.pre.kind = p.post.kind = XformKind::Flip;
  }
  return true;
}

class Runner {
 public:
  Runner(Communicator& c, AdaptState& st, const ReduceCall& call, const Plan& p)
      : c_(c), st_(st), call_(call), p_(p), cuda_(c.backend() == Backend::Cuda) {}

  void run() {
    const ReduceCall& k = call_;
    if (k.count == 0) return core(k.send, k.recv, 0);  // nothing to convert; the ranks still meet
    const int world = c_.world_size(), rank = c_.rank();
    const bool root = k.kind == ReduceKind::Reduce && rank == k.root;
    const bool gets_output = k.kind != ReduceKind::Reduce || root;
    if (k.kind == ReduceKind::Reduce && (k.root < 0 || k.root >= world))
      refuse(c_, "root " + std::to_string(k.root) + " is not a rank of this communicator (world size " +
                     std::to_string(world) + ")");
    if (!k.send) refuse(c_, "the send buffer is null");
    if (gets_output && !k.recv) refuse(c_, "the recv buffer is null");
    if (!p_.has_pre) {  // integer avg: the sum lands in recv (same width), divided there
      core(k.send, k.recv, k.count);
      if (gets_output) pass(p_.post, k.recv, k.recv, k.count);
      return;
    }
    if (k.count > std::numeric_limits<size_t>::max() / static_cast<size_t>(world) / 8)
      refuse(c_, "count " + std::to_string(k.count) + " is too large");
    // Calls whose converted input would pass st.max_scratch run as several collectives of
    // whole elements. The split depends only on what every rank shares (count, world, types), not
    // on whether this rank's part goes through scratch, so every rank issues the same calls.
    const size_t per_elem = dtype_size(p_.dtype) * (k.kind == ReduceKind::ReduceScatter ? world : 1);
    size_t chunk = k.count;
    if (k.count * per_elem > st_.max_scratch) chunk = std::max<size_t>(1, st_.max_scratch / per_elem);
    for (size_t off = 0; off < k.count; off += chunk) part(off, std::min(chunk, k.count - off), root, gets_output);
  }

 private:
  // Elements [off, off + n) of the output (of every rank's block, for reduce-scatter).
  void part(size_t off, size_t n, bool root, bool gets_output) {
    const ReduceCall& k = call_;
    const int world = c_.world_size(), rank = c_.rank();
    const size_t es = static_cast<size_t>(nccl_type_size(k.dtype)), ws = dtype_size(p_.dtype);
    const bool rs = k.kind == ReduceKind::ReduceScatter;
    const uint8_t* send = static_cast<const uint8_t*>(k.send);
    uint8_t* recv = static_cast<uint8_t*>(k.recv) + (gets_output ? off * es : 0);
    // The converted input goes into recv where it has the input's size and width, else scratch.
    const bool same_width = ws == es;
    uint8_t* buf = (same_width && (k.kind == ReduceKind::AllReduce || root)) ? recv
                                                                             : scratch((rs ? n * world : n) * ws);
    if (!rs) pass(p_.pre, send + off * es, buf, n);
    else if (n == k.count) pass(p_.pre, send, buf, n * world);  // the blocks are contiguous
    else
      for (int r = 0; r < world; ++r) pass(p_.pre, send + (r * k.count + off) * es, buf + r * n * ws, n);
    uint8_t* out = buf;  // where the core's result lands on a rank that gets one
    if (rs) {
      out = same_width ? recv : buf + static_cast<size_t>(rank) * n * ws;
      core(buf, out, n);  // into recv, or in place in scratch (the rank's block)
    } else {
      core(buf, buf, n);  // in place (a non-root's recv is not touched)
    }
    if (p_.has_post && gets_output) pass(p_.post, out, recv, n);
  }

  void core(const void* s, void* r, size_t n) {
    const ReduceCall& k = call_;
    switch (k.kind) {
      case ReduceKind::AllReduce: c_.all_reduce(s, r, n, p_.dtype, p_.op, k.stream); break;
      case ReduceKind::ReduceScatter: c_.reduce_scatter(s, r, n, p_.dtype, p_.op, k.stream); break;
      case ReduceKind::Reduce: c_.reduce(s, r, n, p_.dtype, p_.op, k.root, k.stream); break;
    }
  }

  void pass(const Xform& x, const void* src, void* dst, size_t n) {
#if defined(ACTORCC_WITH_CUDA)
    if (cuda_) return cuda::xform(x, src, dst, n, call_.stream, c_.device());
#endif
    host_xform(x, src, dst, n);
  }

  uint8_t* scratch(size_t bytes) {
    bool capturing = false;
#if defined(ACTORCC_WITH_CUDA)
    if (cuda_) capturing = cuda::capturing(call_.stream);
#endif
    bool refused = false;
    void* p;
    size_t held;
    {
      std::lock_guard<std::mutex> lk(st_.mu);
      p = st_.scratch.get(bytes, capturing, &refused);
      held = st_.scratch.size();
    }
    if (refused)
      refuse(c_, std::string("this ") + type_name(call_.dtype) +
                     " reduction needs " + std::to_string(bytes) + " bytes of scratch, more than the " +
                     std::to_string(held) +
                     " this communicator holds, and cannot allocate them while the stream is captured into a "
                     "CUDA graph: run one call of this size and type eagerly (outside the capture) first");
    return static_cast<uint8_t*>(p);
  }

  Communicator& c_;
  AdaptState& st_;
  const ReduceCall& call_;
  const Plan& p_;
  bool cuda_;
};

}  // namespace

bool run_adapted(Communicator& comm, AdaptState& st, const ReduceCall& call) {
  Plan p;
  if (!make_plan(comm, st, call, p)) return false;
  try {
    Runner(comm, st, call, p).run();
  } catch (const CudaError& e) {
    // A pass or the scratch allocation failed on this rank: the others may already wait inside
    // the collective, so the group learns it now rather than at their timeout.
    if (!comm.aborted()) comm.abort("its NCCL reduction adapter failed: " + e.message());
    throw;
  }
  return true;
}

}  // namespace actorcc::ncclabi
