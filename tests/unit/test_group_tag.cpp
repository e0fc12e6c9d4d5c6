// The group tag names a group's shm segments and sockets: the same id gives the same tag in every
// process and every release (ranks of one group must find each other's names), and ids that
// differ in any byte give different tags.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/group_tag.hpp"

using namespace actorcc;

TEST(GroupTag, IsStableForTheSameId) {
  UniqueId zero;
  EXPECT_EQ(group_tag_of(zero), "306c537b2ff38983");  // FNV-1a of 128 zero bytes
  UniqueId counting;
  for (size_t i = 0; i < UniqueId::kBytes; ++i) counting.bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(group_tag_of(counting), "8f0ac8e0cab8e983");
  EXPECT_EQ(group_tag_of(counting), group_tag_of(counting));
}

TEST(GroupTag, DiffersWhenAnyByteDiffers) {
  UniqueId base;
  std::set<std::string> tags{group_tag_of(base)};
  for (size_t i = 0; i < UniqueId::kBytes; ++i) {
    UniqueId id = base;
    id.bytes[i] = 1;
    tags.insert(group_tag_of(id));
  }
  EXPECT_EQ(tags.size(), UniqueId::kBytes + 1);
  UniqueId last;
  last.bytes[UniqueId::kBytes - 1] = 1;
  EXPECT_EQ(group_tag_of(last), "306c527b2ff387d0");
}

TEST(GroupTag, IsSixteenLowercaseHexDigits) {
  UniqueId id;
  for (size_t i = 0; i < UniqueId::kBytes; ++i) id.bytes[i] = static_cast<uint8_t>(255 - i);
  const std::string tag = group_tag_of(id);
  ASSERT_EQ(tag.size(), 16u);
  for (char c : tag) EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << tag;
}
