// The CUDA side of the benchmark behind a plain C++ interface: gpu.cu implements it when the
// build has CUDA (ACTORCC_WITH_CUDA), gpu_stub.cpp otherwise (every call then reports that the
// build has no CUDA, and probe() finds no GPU). Streams are passed as void* (cudaStream_t).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "actorcc/types.hpp"
#include "pattern.hpp"

namespace actorcc::bench::gpu {

struct DeviceInfo {
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-...."
  std::string pci;   // "0000:18:00.0"
};

struct Probe {
  bool built_with_cuda = false;
  std::vector<DeviceInfo> devices;  // empty without a driver or GPU
  std::string error;                // why none were found
  int driver_cuda_version = 0;      // cudaDriverGetVersion (e.g. 13000), 0 when unknown
  int runtime_version = 0;
};

// Never throws and never crashes without a driver.
Probe probe();

// Worker side. Each throws std::runtime_error naming the failed CUDA call.
void set_device(int device);  // cudaSetDevice + context creation
void* malloc_device(size_t bytes);
void free_device(void* p);
void* stream_create();
void stream_destroy(void* s);
void stream_sync(void* s);

// Fills `count` elements of `buf` with this rank's input (element offset `offset` of its send
// buffer), or with the sentinel when `sentinel` is set.
void fill(void* buf, size_t count, DataType t, const Pattern& p, size_t offset, bool sentinel, void* stream);
// Counts the elements of buf[0, count) whose bits differ from the host reference (host_data.hpp).
size_t check(const void* buf, size_t count, DataType t, const Pattern& p, void* stream);

struct Timing {
  double mean_us = 0;  // over back-to-back calls (or graph launches)
  double p50_us = 0;   // per-call times, second pass
  double p99_us = 0;
  size_t wrong = 0;  // most wrong elements seen by one checked call (nccl-tests' #wrong)
  int checks = 0;    // checked calls made
};

// A checked call: fills the inputs and poisons the output, runs `launch` (one collective, or a
// replay of a captured graph), and returns how many output elements are wrong. Its cost is
// never inside a timed region.
using Verify = std::function<size_t(const std::function<void()>& launch)>;

// Times `one_call` (which enqueues one collective on `stream`): `warmup` calls, then `iters`
// back-to-back calls between two events, then a second pass with events around each call.
// graph > 0: the iters calls are captured into one CUDA graph that is launched `graph` times;
// per-call times then come from a one-call graph.
// With `verify`, a checked call follows every timed phase: eager, one call after each pass;
// graph, a replay of the one-call graph and (replay_all: out of place) of the timed graph.
Timing time_calls(void* stream, int warmup, int iters, int graph, const std::function<void()>& one_call,
                  const Verify& verify, bool replay_all);

}  // namespace actorcc::bench::gpu
