// Test-only mutations: bugs compiled in ONLY by the ACTORCC_TEST_MUTATIONS build option (OFF
// by default, never set by the package build), chosen at run time with
// ACTORCC_TEST_MUTATION=shift_tile|drop_rank|half_acc. They exist to show that the GPU tier's
// and the benchmark's checks catch each kind of bug: in the CUDA kernels (the whole library
// built with the option: scripts/device.sh, phase "mutations"), and in the CPU backend's
// all-reduce (algorithms/cpu_all_reduce.cpp alone compiled with it, into the test-only
// actorcc_internal_mutated that only actorcc-bench-mutations links: ctest bench_cpu_mutations).
// In every other build kMutations is false and each hook compiles to nothing. Both have
// internal linkage, so a test-only object and the library's others never share one definition.
#pragma once
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace actorcc {

#if defined(ACTORCC_TEST_MUTATIONS)
constexpr bool kMutations = true;
#else
constexpr bool kMutations = false;
#endif

enum Mutation : int {
  kMutNone = 0,
  kMutShiftTile = 1,  // the reduce-tile kernels store CTA 0's words one 16-byte word late (CPU:
                      // the first KiB of each reduced slice)
  kMutDropRank = 2,   // every reduction leaves out the last rank's contribution
  kMutHalfAcc = 3,    // fp16/bf16 partial sums are rounded to the element type after each fold
};

// The mutation this process runs with (always kMutNone outside the mutation build); an
// unknown name throws, so a misspelt phase cannot pass as "unmutated".
static inline Mutation mutation_from_env() {
  if constexpr (!kMutations) return kMutNone;
  const char* v = std::getenv("ACTORCC_TEST_MUTATION");  // setting: ACTORCC_TEST_MUTATION - test-only build: the kernel bug to inject
  if (!v || !*v || !std::strcmp(v, "none")) return kMutNone;
  if (!std::strcmp(v, "shift_tile")) return kMutShiftTile;
  if (!std::strcmp(v, "drop_rank")) return kMutDropRank;
  if (!std::strcmp(v, "half_acc")) return kMutHalfAcc;
  throw std::invalid_argument(std::string("ACTORCC_TEST_MUTATION=") + v +
                              ": expected none, shift_tile, drop_rank or half_acc");
}

}  // namespace actorcc
