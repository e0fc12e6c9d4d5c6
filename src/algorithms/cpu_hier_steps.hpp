// One step of a hierarchical plan on the CPU: the rule of topology::Step over the work
// buffer, for the members of this rank's node (shared memory) or rail (TCP).
#pragma once
#include <cstddef>
#include <vector>

#include "algorithms/cpu_hier.hpp"

namespace actorcc::cpu {

// Where a step's part lies in the work buffer: element ranges [offset, offset + length).
using Ranges = std::vector<std::pair<size_t, size_t>>;

struct Chunk {
  size_t block = 0;  // elements per block of the work buffer
  int blocks = 1;    // blocks in the work buffer
  size_t c0 = 0;     // this chunk: [c0, c0 + cn) of every block
  size_t cn = 0;
};

Ranges part_ranges(const HierGroup& g, topology::Part part, int rank, const Chunk& c);

// Runs `s` on `buf` (the work buffer; element type `dtype`), reducing with `op` (never Avg).
void run_step(HierGroup& g, const topology::Step& s, uint8_t* buf, const Chunk& c, DataType dtype, RedOp op,
              uint64_t tag);

}  // namespace actorcc::cpu
