// Public value types shared by every layer: data types, reduction ops, backends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace actorcc {

enum class DataType : uint8_t {
  Float32 = 0, Float16, BFloat16, Float64, Int8, UInt8, Int32, Int64,
};
inline constexpr int kNumDataTypes = 8;

enum class RedOp : uint8_t { Sum = 0, Prod, Min, Max, Avg };
inline constexpr int kNumRedOps = 5;

enum class Backend : uint8_t { Auto = 0, Cpu, Cuda };

enum class Collective : uint8_t {
  AllReduce = 0, ReduceScatter, AllGather, Broadcast, Barrier,
  // Point-to-point (Send, Recv, and SendRecv: a batch of both issued as one) and the
  // collectives built on it; Reduce reduces to one root.
  Send, Recv, SendRecv, AllToAll, AllToAllV, Reduce, Gather, Scatter,
};
inline constexpr int kNumCollectives = 13;

// Bytes per element; 0 for an out-of-range value.
size_t dtype_size(DataType t) noexcept;

std::string_view to_string(DataType t) noexcept;
std::string_view to_string(RedOp op) noexcept;
std::string_view to_string(Backend b) noexcept;
std::string_view to_string(Collective c) noexcept;

// Parsers accept the names printed above plus common aliases ("float", "half", "bf16",
// "int", "fp64", ...). They throw InvalidArgument naming the bad text.
DataType parse_dtype(std::string_view s);
RedOp parse_redop(std::string_view s);
Backend parse_backend(std::string_view s);
Collective parse_collective(std::string_view s);

}  // namespace actorcc
