// Reduction math on the GPU, with the same semantics as src/reduce/host_reduce.cpp:
// - float16/bfloat16 widen to float32, reduce in float32 over all inputs, round once (RNE);
// - integer sum/prod wrap (computed in the unsigned type of the same width);
// - avg: floats sum then divide once; integers sum exactly in 64 bits, divide toward zero;
// - min/max propagate NaN (first NaN in rank order).
// Inputs are always folded in rank order 0..world-1, so every rank computes the same bits.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "actorcc/types.hpp"
#include "common/mutation.hpp"

namespace actorcc::cuda {

struct Half { uint16_t bits; };
struct BFloat { uint16_t bits; };

template <typename T> struct Widen { using Acc = T; static __device__ __forceinline__ T load(T v) { return v; } static __device__ __forceinline__ T store(T a) { return a; } };
template <> struct Widen<Half> {
  using Acc = float;
  static __device__ __forceinline__ float load(Half v) { return __half2float(__ushort_as_half(v.bits)); }
  static __device__ __forceinline__ Half store(float a) { return Half{__half_as_ushort(__float2half_rn(a))}; }
};
template <> struct Widen<BFloat> {
  using Acc = float;
  static __device__ __forceinline__ float load(BFloat v) { return __bfloat162float(__ushort_as_bfloat16(v.bits)); }
  static __device__ __forceinline__ BFloat store(float a) { return BFloat{__bfloat16_as_ushort(__float2bfloat16_rn(a))}; }
};

template <typename T> constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

template <typename T, bool = kIsFloat<T>> struct WrapAcc { using type = typename Widen<T>::Acc; };
template <typename T> struct WrapAcc<T, false> { using type = std::make_unsigned_t<T>; };

template <typename T> struct SumOp {
  using Acc = typename WrapAcc<T>::type;
  static __device__ __forceinline__ Acc load(T v) {
    if constexpr (kIsFloat<T>) return Widen<T>::load(v); else return static_cast<Acc>(v);
  }
  static __device__ __forceinline__ Acc combine(Acc a, Acc x) { return static_cast<Acc>(a + x); }
  static __device__ __forceinline__ T finish(Acc a, int) {
    if constexpr (kIsFloat<T>) return Widen<T>::store(a); else return static_cast<T>(a);
  }
};
template <typename T> struct ProdOp : SumOp<T> {
  using Acc = typename SumOp<T>::Acc;
  static __device__ __forceinline__ Acc combine(Acc a, Acc x) {
    if constexpr (!kIsFloat<T> && sizeof(Acc) < sizeof(unsigned)) return static_cast<Acc>(unsigned(a) * unsigned(x));
    else return static_cast<Acc>(a * x);
  }
};
template <typename T> struct MinMaxBase {
  using Acc = std::conditional_t<kIsFloat<T>, typename Widen<T>::Acc, T>;
  static __device__ __forceinline__ Acc load(T v) {
    if constexpr (kIsFloat<T>) return Widen<T>::load(v); else return v;
  }
  static __device__ __forceinline__ T finish(Acc a, int) {
    if constexpr (kIsFloat<T>) return Widen<T>::store(a); else return a;
  }
};
template <typename T> struct MinOp : MinMaxBase<T> {
  using Acc = typename MinMaxBase<T>::Acc;
  static __device__ __forceinline__ Acc combine(Acc a, Acc x) { return (x < a || x != x) ? x : a; }
};
template <typename T> struct MaxOp : MinMaxBase<T> {
  using Acc = typename MinMaxBase<T>::Acc;
  static __device__ __forceinline__ Acc combine(Acc a, Acc x) { return (x > a || x != x) ? x : a; }
};
template <typename T> struct AvgOp {
  static constexpr bool kFloat = kIsFloat<T>;
  using Acc = std::conditional_t<kFloat, typename Widen<T>::Acc, unsigned long long>;
  static __device__ __forceinline__ Acc load(T v) {
    if constexpr (kFloat) return Widen<T>::load(v);
    else return static_cast<unsigned long long>(static_cast<long long>(v));
  }
  static __device__ __forceinline__ Acc combine(Acc a, Acc x) { return a + x; }
  static __device__ __forceinline__ T finish(Acc a, int n) {
    if constexpr (kFloat) return Widen<T>::store(a / static_cast<Acc>(n));
    else if constexpr (std::is_signed_v<T>) return static_cast<T>(static_cast<long long>(a) / n);
    else return static_cast<T>(a / static_cast<unsigned long long>(n));
  }
};

// Reduces N elements packed in a B-byte word from each of `world` sources, folded in rank
// order; get(k) returns source k's word. R > 0 unrolls the source loop over R >= world
// (compile-time indices, so a caller's array of prefetched words stays in registers); R = 0
// loops over `world` at run time (one copy of get(), for get()s that poll). Same bits either way.
// `mutation`: the test-only build's injected bugs (common/mutation.hpp); ignored otherwise.
template <typename T, typename Op, typename Word, int R = 0, typename Get>
__device__ __forceinline__ Word reduce_word(int world, Get get, int mutation = 0) {
  constexpr int N = sizeof(Word) / sizeof(T);
  constexpr bool kHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;
  union U { Word w; T e[N]; };
  U u;
  u.w = get(0);
  typename Op::Acc acc[N];
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = Op::load(u.e[i]);
  auto fold = [&](int k) {
    u.w = get(k);
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = Op::combine(acc[i], Op::load(u.e[i]));
    if constexpr (kMutations && kHalf)
      if (mutation == kMutHalfAcc) {
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] = Widen<T>::load(Widen<T>::store(acc[i]));
      }
  };
  const int folded = (kMutations && mutation == kMutDropRank && world > 1) ? world - 1 : world;
  if constexpr (R == 0) {
    for (int k = 1; k < folded; ++k) fold(k);
  } else {
#pragma unroll
    for (int k = 1; k < R; ++k)
      if (k < folded) fold(k);
  }
#pragma unroll
  for (int i = 0; i < N; ++i) u.e[i] = Op::finish(acc[i], world);
  return u.w;
}

// Dispatch helper: calls f.template operator()<T, Op>() for a runtime (dtype, op) pair (validated
// by the Communicator before any call reaches a kernel).
template <typename T, typename F>
void with_op(RedOp op, F&& f) {
  switch (op) {
    case RedOp::Sum: f.template operator()<T, SumOp<T>>(); break;
    case RedOp::Prod: f.template operator()<T, ProdOp<T>>(); break;
    case RedOp::Min: f.template operator()<T, MinOp<T>>(); break;
    case RedOp::Max: f.template operator()<T, MaxOp<T>>(); break;
    case RedOp::Avg: f.template operator()<T, AvgOp<T>>(); break;
  }
}
template <typename F>
void with_dtype_op(DataType dtype, RedOp op, F&& f) {
  switch (dtype) {
    case DataType::Float32: with_op<float>(op, f); break;
    case DataType::Float16: with_op<Half>(op, f); break;
    case DataType::BFloat16: with_op<BFloat>(op, f); break;
    case DataType::Float64: with_op<double>(op, f); break;
    case DataType::Int8: with_op<int8_t>(op, f); break;
    case DataType::UInt8: with_op<uint8_t>(op, f); break;
    case DataType::Int32: with_op<int32_t>(op, f); break;
    case DataType::Int64: with_op<int64_t>(op, f); break;
  }
}

}  // namespace actorcc::cuda
