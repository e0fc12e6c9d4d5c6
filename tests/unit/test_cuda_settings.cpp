// The CUDA settings table (ACTORCC_CUDA_SETTINGS): environment reads, the cross-rank encoding and
// docs/settings.md, all generated from it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "actorcc/error.hpp"
#include "backends/cuda/cuda_settings.hpp"

using namespace actorcc;

namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

}  // namespace

TEST(CudaSettings, DefaultsAreTheTablesAndBlocksDefaultToTheSMs) {
  const auto s = cuda::Settings::local({}, 132);
  EXPECT_EQ(s.tune.threads, 512);
  EXPECT_EQ(s.tune.ll_max, size_t(64) << 10);
  EXPECT_EQ(s.tune.ll128_rsag_max, SIZE_MAX);
  EXPECT_EQ(s.tune.data_blocks, 132);
  EXPECT_EQ(s.tune.ll_blocks, 128);
  EXPECT_EQ(s.tune.ll128_blocks, 0);
  EXPECT_EQ(s.tune.pdl, 1);
  EXPECT_EQ(s.tune.share_gpu, 0);
  EXPECT_EQ(s.workspace_bytes, size_t(136) << 20);
  EXPECT_EQ(s.ll_slot_bytes, size_t(16) << 10);
}

TEST(CudaSettings, EnvironmentReplacesDefaultsWithinBounds) {
  ScopedEnv a("ACTORCC_CUDA_THREADS", "4096"), b("ACTORCC_CUDA_LL128_THREADS", "100"),
      c("ACTORCC_CUDA_BLOCKS", "5000"), d("ACTORCC_CUDA_PDL", "off"), e("ACTORCC_CUDA_LL_MAX", "0"),
      f("ACTORCC_CUDA_SHARE_GPU", "1"), g("ACTORCC_CUDA_PIPE_MIN", "12345");
  const auto s = cuda::Settings::local({}, 132);
  EXPECT_EQ(s.tune.threads, 512);          // clamped
  EXPECT_EQ(s.tune.ll128_threads, 96);     // a multiple of 32
  EXPECT_EQ(s.tune.data_blocks, 1024);     // the kernels' row count
  EXPECT_EQ(s.tune.pdl, 0);
  EXPECT_EQ(s.tune.ll_max, size_t(64) << 10);  // 0 keeps the default
  EXPECT_EQ(s.tune.share_gpu, 1);
  EXPECT_EQ(s.tune.pipe_min, 12345u);
}

TEST(CudaSettings, RankSettingsAreReadButNeverAgreed) {
  EXPECT_EQ(cuda::Settings::local({}, 132).own.abort_poll_us, 20);
  {
    ScopedEnv a("ACTORCC_CUDA_ABORT_POLL_US", "0");  // 0 means something here: every thread polls
    const auto s = cuda::Settings::local({}, 132);
    EXPECT_EQ(s.own.abort_poll_us, 0);
    const std::string blob = s.encode();
    EXPECT_EQ(blob.find("abort_poll"), std::string::npos) << blob;
    EXPECT_EQ(cuda::Settings::decode(blob).own.abort_poll_us, 20);  // the receiver keeps its own
  }
  {
    ScopedEnv a("ACTORCC_CUDA_ABORT_POLL_US", "-3");
    EXPECT_EQ(cuda::Settings::local({}, 132).own.abort_poll_us, 20);
  }
  {
    ScopedEnv a("ACTORCC_CUDA_ABORT_POLL_US", "5000000");
    EXPECT_EQ(cuda::Settings::local({}, 132).own.abort_poll_us, 1000000);
  }
  EXPECT_NE(cuda::settings_doc_rows().find("| ACTORCC_CUDA_ABORT_POLL_US |"), std::string::npos);
}

TEST(CudaSettings, MalformedVariableNamesItself) {
  ScopedEnv a("ACTORCC_CUDA_PUSH_MAX", "4MiB");
  try {
    cuda::Settings::local({}, 132);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ACTORCC_CUDA_PUSH_MAX"), std::string::npos) << e.what();
  }
}

TEST(CudaSettings, EncodingRoundTripsEveryFieldOfRandomSettings) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 50; ++i) {
    cuda::Settings s;
    // Distinct random values per field, so a field decoded into another would show.
#define RANDOMIZE(field, type, ...) s.tune.field = static_cast<type>(1 + rng() % 1000000);
    ACTORCC_CUDA_SETTINGS(RANDOMIZE)
#undef RANDOMIZE
    s.workspace_bytes = rng();
    s.ll_slot_bytes = rng() % 100000;
    s.algo = i % 2 ? "twoshot_pipe" : "";
    const auto d = cuda::Settings::decode(s.encode());
#define SAME(field, ...) EXPECT_EQ(d.tune.field, s.tune.field) << #field;
    ACTORCC_CUDA_SETTINGS(SAME)
#undef SAME
    EXPECT_EQ(d.workspace_bytes, s.workspace_bytes);
    EXPECT_EQ(d.ll_slot_bytes, s.ll_slot_bytes);
    EXPECT_EQ(d.algo, s.algo);
  }
}

TEST(CudaSettings, DecodeRefusesAnotherVersionOrShapeNamingIt) {
  const std::string good = cuda::Settings::local({}, 132).encode();
  auto fails_with = [](const std::string& blob, const std::string& needle) {
    try {
      cuda::Settings::decode(blob);
      ADD_FAILURE() << "accepted: " << blob;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::string v2 = good;
  v2.replace(v2.find(" 1 "), 3, " 2 ");
  fails_with(v2, "another actorcc");
  fails_with(good + " extra=1", "fields where the header says");
  std::string missing = good;
  missing.erase(missing.find(" pdl="), std::string(" pdl=1").size());
  fails_with(missing, "fields where the header says");
  std::string renamed = good;
  renamed.replace(renamed.find(" pdl="), 5, " pdx=");
  fails_with(renamed, "'pdl' missing");
  std::string bad = good;
  bad.replace(bad.find(" ll_max=") + 8, 1, "x");
  fails_with(bad, "'ll_max'");
  fails_with("3 4 5", "another actorcc");  // a blob of the old positional encoding
}

TEST(CudaSettings, DocsListEveryRowOfTheTable) {
  const std::string path = std::string(ACTORCC_SOURCE_DIR) + "/docs/settings.md";
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- generated from ACTORCC_CUDA_SETTINGS: begin -->\n";
  const std::string header = "| variable | what it changes | default |\n| --- | --- | --- |\n";
  const std::string end = "<!-- generated from ACTORCC_CUDA_SETTINGS: end -->";
  const auto b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string have = doc.substr(b + begin.size(), e - b - begin.size());
  EXPECT_EQ(have, header + cuda::settings_doc_rows())
      << "docs/settings.md differs from the table; its block should read:\n" << header << cuda::settings_doc_rows();
}
