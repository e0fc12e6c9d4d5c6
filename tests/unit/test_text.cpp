// cat() and join(): the pieces of a text in order, numbers written as std::to_string writes them,
// so that error messages converted to them read byte for byte as before.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.hpp"

using namespace actorcc;

TEST(Text, CatJoinsStringsAndNumbersInOrder) {
  const std::string s = "rank";
  const std::string_view v = " of ";
  EXPECT_EQ(cat(s, ' ', 3, v, size_t{8}, ": ", "done"), "rank 3 of 8: done");
  EXPECT_EQ(cat(), "");
  EXPECT_EQ(cat("only"), "only");
}

TEST(Text, CatWritesNumbersAsToStringDoes) {
  EXPECT_EQ(cat(-7), std::to_string(-7));
  EXPECT_EQ(cat(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(cat(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(cat(static_cast<uint8_t>(200)), "200");  // a byte-sized integer is a number, not a character
  EXPECT_EQ(cat(1.5), std::to_string(1.5));
  EXPECT_EQ(cat(0.1f), std::to_string(0.1f));
  EXPECT_EQ(cat(2.0 / 3), "0.666667");
}

TEST(Text, JoinPutsTheSeparatorBetweenElements) {
  EXPECT_EQ(join(std::vector<int>{1, 2, 3}, ", "), "1, 2, 3");
  EXPECT_EQ(join(std::vector<int>{4}, ", "), "4");
  EXPECT_EQ(join(std::vector<int>{}, ", "), "");
  EXPECT_EQ(join(std::vector<std::string>{"a", "", "c"}, "\n  "), "a\n  \n  c");
  EXPECT_EQ(join(std::vector<size_t>{0, 18}, ""), "018");
}
