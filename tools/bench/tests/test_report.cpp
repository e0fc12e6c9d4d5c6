// The results.tsv startup line (report.hpp): the set-up steps and the note travel from the
// worker to the launcher's table and JSON; a line without them still reads.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "report.hpp"

namespace actorcc::bench {
namespace {

std::string printed(const ImplResult& r) {
  char* text = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&text, &len);
  print_startup(f, r);
  std::fclose(f);
  std::string s(text, len);
  std::free(text);
  return s;
}

TEST(StartupLine, SetupStepsAndNoteRoundTrip) {
  std::vector<ImplResult> out;
  ASSERT_EQ(apply_line(format_impl("actorcc"), out, nullptr), "impl");
  const auto line = format_startup(478.5, 3.25, {{"rail_setup", 475.25}, {"nccl_init", 420.5}, {"connect", 54.75}},
                                   "a note\twith a tab");
  ASSERT_EQ(apply_line(line, out, nullptr), "startup");
  const ImplResult& r = out.back();
  EXPECT_DOUBLE_EQ(r.init_ms, 478.5);
  EXPECT_DOUBLE_EQ(r.first_op_ms, 3.25);
  ASSERT_EQ(r.setup_ms.size(), 3u);
  EXPECT_EQ(r.setup_ms[0].first, "rail_setup");
  EXPECT_DOUBLE_EQ(r.setup_ms[0].second, 475.25);
  EXPECT_EQ(r.setup_ms[2].first, "connect");
  EXPECT_DOUBLE_EQ(r.setup_ms[2].second, 54.75);
  EXPECT_EQ(r.startup_note, "a note with a tab");
  const std::string table = printed(r);
  EXPECT_NE(table.find("rail_setup 475.2 ms, nccl_init 420.5 ms, connect 54.8 ms"), std::string::npos) << table;
  EXPECT_NE(table.find("# actorcc: a note with a tab"), std::string::npos) << table;
}

TEST(StartupLine, WithoutStepsOrNote) {
  std::vector<ImplResult> out;
  apply_line(format_impl("nccl"), out, nullptr);
  ASSERT_EQ(apply_line(format_startup(7.5, 0.5), out, nullptr), "startup");
  EXPECT_TRUE(out.back().setup_ms.empty());
  EXPECT_TRUE(out.back().startup_note.empty());
  // The three-field line of earlier runs.
  ASSERT_EQ(apply_line("startup\t9\t1\n", out, nullptr), "startup");
  EXPECT_DOUBLE_EQ(out.back().init_ms, 9);
  EXPECT_TRUE(out.back().setup_ms.empty());
  EXPECT_EQ(printed(out.back()).find("set-up"), std::string::npos);
}

}  // namespace
}  // namespace actorcc::bench
