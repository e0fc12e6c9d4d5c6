// Host-memory counterparts of gpu::fill / gpu::check for the CPU backend, and host buffers.
#pragma once
#include <cstddef>
#include <vector>

#include "actorcc/types.hpp"
#include "pattern.hpp"

namespace actorcc::bench::host {

// Page-aligned host buffer (what a CPU-backend user would pass).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(Buffer&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

void fill(void* buf, size_t count, DataType t, const Pattern& p, size_t offset, bool sentinel);
size_t check(const void* buf, size_t count, DataType t, const Pattern& p);

// Linear-interpolated percentile of v (q in [0, 1]).
double percentile(std::vector<double> v, double q);

}  // namespace actorcc::bench::host
