// The CUDA backend's settings as one rank read them (the ACTORCC_CUDA_SETTINGS table in
// algorithms/cuda/tuning.hpp, plus what Options decide), and their cross-rank encoding: every
// rank sends its own, every rank uses rank 0's (data_blocks: the smallest), so ranks whose
// environments differ still launch the same kernels. Plain host code, unit-tested without a GPU.
#pragma once
#include <cstddef>
#include <string>

#include "actorcc/options.hpp"
#include "algorithms/cuda/tuning.hpp"

namespace actorcc::cuda {

struct Settings {
  Tuning tune;
  // This rank's own (ACTORCC_CUDA_RANK_SETTINGS): not encoded; decode() leaves the defaults.
  RankTuning own;
  std::string algo;            // Options.algo / ACTORCC_ALGO; "" = the planner
  size_t workspace_bytes = 0;  // push slots (the [data] region of kernels/device_comm.cuh)
  // 16 KiB: the LL one-shot (used up to 64 KiB) needs 1 KiB per CTA; larger forced calls take rounds.
  size_t ll_slot_bytes = 16 << 10;

  // This rank's settings: the table's defaults, replaced by ACTORCC_CUDA_* variables;
  // `sm_count` is data_blocks' default.
  static Settings local(const Options& options, int sm_count);

  // "actorcc-cuda-settings <version> <fields>" then name=value for every field. decode() throws
  // InvalidArgument naming what differs when a blob has another version, another number of
  // fields, or a field it does not know or lacks: never a silent shift of one field into another.
  std::string encode() const;
  static Settings decode(const std::string& blob);
};

// The rows of docs/settings.md's ACTORCC_CUDA_* table, as the tables generate them (the agreed
// settings, then each rank's own).
std::string settings_doc_rows();

}  // namespace actorcc::cuda
