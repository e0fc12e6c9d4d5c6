// ShmSegment: RAII ownership of POSIX shared memory (create/open/unlink, nothing left behind).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "actorcc/error.hpp"
#include "transport/shm/shm_segment.hpp"

namespace actorcc {
namespace {

std::string unique_name() { return "/actorcc-unittest-" + std::to_string(::getpid()) + "-" + std::to_string(rand()); }
bool in_dev_shm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(ShmSegment, CreateOpenShareAndUnlink) {
  const std::string name = unique_name();
  {
    ShmSegment a = ShmSegment::create(name, 1 << 16);
    EXPECT_TRUE(in_dev_shm(name));
    EXPECT_EQ(static_cast<unsigned char*>(a.data())[100], 0);  // zero-filled
    ShmSegment b = ShmSegment::open(name, 1 << 16, Deadline::after(std::chrono::seconds(1)));
    std::memcpy(a.data(), "hello", 6);
    EXPECT_STREQ(static_cast<const char*>(b.data()), "hello");  // same memory
    a.unlink();
    EXPECT_FALSE(in_dev_shm(name));
    std::memcpy(b.data(), "still", 6);  // mappings outlive the name
    EXPECT_STREQ(static_cast<const char*>(a.data()), "still");
  }
  EXPECT_FALSE(in_dev_shm(name));
}

TEST(ShmSegment, DestructorUnlinksWhatItCreated) {
  const std::string name = unique_name();
  {
    ShmSegment a = ShmSegment::create(name, 4096);
    ShmSegment moved = std::move(a);  // ownership moves with the object
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_TRUE(in_dev_shm(name));
  }
  EXPECT_FALSE(in_dev_shm(name));
}

TEST(ShmSegment, CreateIsExclusive) {
  const std::string name = unique_name();
  ShmSegment a = ShmSegment::create(name, 4096);
  EXPECT_THROW(ShmSegment::create(name, 4096), SystemError);
  EXPECT_TRUE(in_dev_shm(name));  // the failed create must not remove the owner's segment
}

TEST(ShmSegment, OpenTimesOutWhenMissing) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(ShmSegment::open(unique_name(), 4096, Deadline::after(std::chrono::milliseconds(50))), TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

}  // namespace
}  // namespace actorcc
