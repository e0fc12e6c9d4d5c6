// The hierarchical plans (topology/rails.hpp) on GPUs: node steps through actorcc's CUDA
// backend over the node's ranks (NVLink), rail steps through NCCL (one rank per node). The
// node steps run on one stream and the rail steps on another, chunk by chunk with events
// between them, so the node step of one chunk overlaps the rail step of the previous one.
// Every call forks from the caller's stream and joins back into it (CUDA-graph capturable).
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include "backends/backend.hpp"
#include "backends/hier/gpu_hier_schedule.hpp"
#include "common/cuda_owners.hpp"
#include "topology/rails.hpp"
#include "transport/nccl/nccl_group.hpp"

namespace actorcc::hier {

constexpr int kMaxDepth = 2;  // chunks in flight (slots of the scratch buffer)

// What the rules run on; the backend (gpu_hier_backend_cuda.cpp) builds and owns it.
struct GpuHier {
  int rank = 0;
  topology::NodeLayout layout;
  topology::RailPlan rails;
  topology::HierTuning tuning;
  BackendImpl* node = nullptr;        // the CUDA backend over this rank's node
  nccl::NcclGroup* rail = nullptr;    // this rank's rail; null when it is in none
  cudaStream_t node_s = nullptr, rail_s = nullptr;
  cuda_rt::Event* fork = nullptr;     // caller -> both streams
  cuda_rt::Event* joins = nullptr;    // [2]: both streams -> caller
  cuda_rt::Event* ev0 = nullptr;      // [kMaxDepth]: stage 0 -> stage 1
  cuda_rt::Event* ev1 = nullptr;      // [kMaxDepth]: stage 1 -> stage 2 (or -> stage 0, slot free)
  cuda_rt::Event* hop = nullptr;      // one-off hand-overs between the streams
  uint8_t* scratch = nullptr;         // kMaxDepth slots of slot_bytes
  size_t slot_bytes = 0;
  int* one = nullptr;                 // one int for the barrier's rail step
};

// Runs `a` by `plan` (plan_hier's choice for it). Throws UnsupportedError for an integer Avg.
void run_rules(GpuHier& g, const CollArgs& a, const topology::HierPlan& plan);

}  // namespace actorcc::hier
