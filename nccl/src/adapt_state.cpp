// The per-communicator state of the adapted reductions: scratch memory and the PreMulSum op
// table (ncclRedOpCreatePreMulSum / ncclRedOpDestroy).
#include <atomic>
#include <climits>
#include <cstring>
#include <new>

#include "adapt_state.hpp"

namespace actorcc::ncclabi {

namespace {
constexpr int kSuccess = 0, kSystemError = 2, kInternalError = 3, kInvalidArgument = 4;
constexpr int kScalarDevice = 0, kScalarHostImmediate = 1;

// Handles are drawn from one process-wide sequence, so an op of one communicator is never a
// live op of another (a call that passes it is refused) and a destroyed handle is not reused.
int next_handle() {
  static std::atomic<uint32_t> seq{0};
  return kNumOps + static_cast<int>(seq.fetch_add(1, std::memory_order_relaxed) % (INT_MAX - kNumOps));
}
}  // namespace

Scratch::~Scratch() {
  release(ptr_);
  for (void* p : retired_) release(p);
}

void Scratch::release(void* p) noexcept {
#if defined(ACTORCC_WITH_CUDA)
  if (cuda_) cuda::free(p, device_);
#endif
  (void)p;
}

void* Scratch::get(size_t bytes, bool capturing, bool* refused) {
  *refused = false;
  if (bytes == 0) return nullptr;
  if (!cuda_) {
    if (bytes > bytes_) {
      host_.resize((bytes + 7) / 8);
      bytes_ = host_.size() * 8;
    }
    return host_.data();
  }
#if defined(ACTORCC_WITH_CUDA)
  if (bytes > bytes_) {
    if (capturing) {  // cudaMalloc is not allowed inside a capture: the caller refuses the call
      *refused = true;
      return nullptr;
    }
    // Grow geometrically so a sequence of rising sizes allocates a few times, not every call.
    const size_t want = bytes > 2 * bytes_ ? bytes : 2 * bytes_;
    void* p = cuda::alloc(want, device_);
    if (pinned_) retired_.push_back(ptr_);
    else release(ptr_);
    ptr_ = p;
    bytes_ = want;
    pinned_ = false;
  }
  if (capturing) pinned_ = true;
  return ptr_;
#else
  (void)capturing;
  *refused = true;
  return nullptr;
#endif
}

AdaptState::AdaptState(Communicator& c)
    : comm(&c), scratch(c.backend() == Backend::Cuda, c.device()) {}

void AdaptStateDeleter::operator()(AdaptState* s) const noexcept { delete s; }

AdaptStatePtr make_adapt_state(Communicator& comm) { return AdaptStatePtr(new AdaptState(comm)); }

int create_premul(AdaptState& st, int* op_out, void* scalar, int dtype, int residence) {
  if (!op_out || !scalar || dtype < 0 || dtype >= kNumTypes ||
      (residence != kScalarDevice && residence != kScalarHostImmediate))
    return kInvalidArgument;
  PremulOp op;
  op.dtype = dtype;
  if (residence == kScalarHostImmediate) op.scalar = load_bits(scalar, nccl_type_size(dtype));
  else op.scalar_ptr = scalar;
  try {
    std::lock_guard<std::mutex> lk(st.mu);
    const int h = next_handle();
    st.ops[h] = op;
    *op_out = h;
    return kSuccess;
  } catch (const std::bad_alloc&) {
    return kSystemError;
  } catch (...) {
    return kInternalError;
  }
}

int destroy_premul(AdaptState& st, int op) {
  try {
    std::lock_guard<std::mutex> lk(st.mu);
    return st.ops.erase(op) ? kSuccess : kInvalidArgument;
  } catch (...) {
    return kInternalError;
  }
}

}  // namespace actorcc::ncclabi
