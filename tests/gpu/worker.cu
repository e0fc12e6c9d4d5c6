// gpu_worker's shared state and helpers (worker.hpp).
#include "worker.hpp"

#include <map>
#include <stdexcept>

namespace gw {

int g_rank = 0, g_world = 1;
long g_cases = 0, g_fail = 0;
cudaStream_t g_stream;
char* d_a = nullptr;
char* d_b = nullptr;
size_t g_buf_bytes = 0;
bool g_shared_gpu = false;
long g_sample = 1;
testref::Tally g_tally;

long rounds(bool quick, long full) { return g_shared_gpu ? 20 : quick ? 100 : full; }

bool sampled_out() {
  static unsigned long seq = 0;
  const unsigned long k = seq++;
  return g_sample > 1 && long(k % g_sample) != (g_world - 1) % g_sample;
}

void fail(const std::string& what) {
  ++g_fail;
  if (g_fail <= 40) std::fprintf(stderr, "rank %d FAIL %s\n", g_rank, what.c_str());
}

void sync_or_fail(const std::string& what, bool whole_device) {
  const cudaError_t e = whole_device ? cudaDeviceSynchronize() : cudaStreamSynchronize(g_stream);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "rank %d: CUDA error after %s: %s\n", g_rank, what.c_str(), cudaGetErrorString(e));
    std::exit(11);
  }
}

void check_hashes(Communicator& c, const std::string& what, const void* got, const void* want, size_t bytes,
                  bool same_output) {
  const std::string mine = std::to_string(testref::fnv(got, bytes)) + ":" + std::to_string(testref::fnv(want, bytes));
  const auto all = c.allgather_bytes(mine);
  for (size_t r = 0; r < all.size(); ++r) {
    const size_t colon = all[r].find(':');
    if (all[r].compare(0, colon, all[r], colon + 1) != 0) {
      fail(what + ": rank " + std::to_string(r) + "'s output differs bitwise from the reference");
      return;
    }
    if (same_output && all[r] != all[0]) {
      fail(what + ": rank " + std::to_string(r) + "'s output differs bitwise from rank 0's");
      return;
    }
  }
}

ScopedEnv::ScopedEnv(const EnvList& env) {
  for (auto& [name, value] : env) {
    const char* old = std::getenv(name);
    before_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name, value, 1);
  }
}
ScopedEnv::~ScopedEnv() {
  for (auto& [name, old] : before_)
    if (old) setenv(name, old->c_str(), 1);
    else unsetenv(name);
}

namespace {
std::vector<std::string> g_ids;
std::map<std::string, size_t> g_id_of;  // communicator name -> index into g_ids
}  // namespace

void set_comm_ids(std::vector<std::string> ids) { g_ids = std::move(ids); }

std::unique_ptr<Communicator> make_comm(const std::string& name, const std::string& algo, const EnvList& env,
                                        std::chrono::milliseconds timeout) {
  if (g_id_of.count(name)) throw std::logic_error("gpu_worker: communicator name '" + name + "' used twice");
  if (g_id_of.size() >= g_ids.size())
    throw std::logic_error("gpu_worker: more communicators than ids (gpu_launch --ids " + std::to_string(g_ids.size()) +
                           "), at '" + name + "'");
  const size_t k = g_id_of.size();
  g_id_of[name] = k;
  const ScopedEnv scoped(env);
  Options o;
  o.backend = Backend::Cuda;
  o.algo = algo;
  o.timeout = timeout;
  o.join_timeout = std::chrono::seconds(60);
  return std::make_unique<Communicator>(UniqueId::parse(g_ids[k]), g_rank, g_world, o);
}

void register_test_buffers(Communicator& c) {
  c.register_buffer(d_a, g_buf_bytes + 4096);
  c.register_buffer(d_b, g_buf_bytes + 4096);
}

}  // namespace gw
