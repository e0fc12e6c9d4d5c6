// mp_worker's bad_call mode: one rank's call is refused, the others make the same call with good
// arguments. The culprit waits first so the others are already blocked in the call, and rank
// (culprit + 1) % world enters only after the refusal, so both a pending and a later call are
// covered.
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include "faults.hpp"

namespace mpw {

int bad_call(Communicator& c, const Args& a, const std::string& tag) {
  const int me = c.rank(), n = c.world_size();
  const bool culprit = me == a.culprit;
  small_all_reduce_check(c);  // the group works before
  std::vector<float> in(4096, 1.0f), out(4096 * n, 0.0f);
  const std::vector<size_t> counts(n, 4), short_counts(n - 1, 4);
  const std::map<std::string, std::function<void(bool)>> calls = {
      {"null_send", [&](bool bad) { c.all_reduce(bad ? nullptr : in.data(), out.data(), in.size(), DataType::Float32, RedOp::Sum); }},
      {"root", [&](bool bad) { c.broadcast(in.data(), out.data(), in.size(), DataType::Float32, bad ? n : 0); }},
      {"op", [&](bool bad) { c.all_reduce(in.data(), out.data(), in.size(), DataType::Float32, bad ? static_cast<RedOp>(77) : RedOp::Max); }},
      {"dtype", [&](bool bad) { c.all_gather(in.data(), out.data(), 1024, bad ? static_cast<DataType>(99) : DataType::Float32); }},
      {"misaligned", [&](bool bad) {
         c.reduce_scatter(in.data(), reinterpret_cast<float*>(reinterpret_cast<char*>(out.data()) + (bad ? 2 : 0)), 1024 / n,
                          DataType::Float32, RedOp::Sum);
       }},
      {"a2av_counts", [&](bool bad) { c.all_to_all_v(in.data(), counts, out.data(), bad ? short_counts : counts, DataType::Float32); }},
  };
  const auto call = calls.at(a.bad);
  const auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (culprit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::cout << "FAULT" << std::endl;
    try {
      call(true);
      std::cerr << tag << ": the bad call (" << a.bad << ") was accepted" << std::endl;
      return 3;
    } catch (const InvalidArgument& e) {
      std::cerr << tag << " refused as expected: " << e.what() << std::endl;
    }
  } else {
    if (me == (a.culprit + 1) % n) std::this_thread::sleep_for(std::chrono::milliseconds(600));
    try {
      call(false);
      std::cerr << tag << ": the call completed although rank " << a.culprit << " refused its part" << std::endl;
      return 3;
    } catch (const RemoteError& e) {
      const std::string what = e.what();
      std::cerr << tag << " got RemoteError after " << secs() << " s: " << what << std::endl;
      if (e.culprit() != a.culprit || !names_rank(what, a.culprit) || what.find("bad argument") == std::string::npos)
        return 3;
    }
  }
  // The group is aborted for every rank, the culprit included: a later call fails at once.
  try {
    c.barrier();
  } catch (const RemoteError& e) {
    std::cerr << tag << " later call: " << e.what() << std::endl;
    return e.culprit() == a.culprit ? 0 : 3;
  }
  std::cerr << tag << ": a later call succeeded on an aborted group" << std::endl;
  return 3;
}

}  // namespace mpw
