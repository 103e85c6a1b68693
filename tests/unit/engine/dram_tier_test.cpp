// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/dram_tier.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::TempDir;

constexpr uint64_t kOneTiB = uint64_t{1} << 40;  // more than any machine these tests run on

std::vector<std::byte> bytes(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 7 + seed);
  return v;
}

TEST(DramTier, HoldsPayloadsAndEvictsTheLeastRecentlyUsed) {
  auto made = DramTier::create(3 * 4096, 4096);  // three slabs
  ASSERT_OK(made);
  DramTier& tier = **made;
  auto a = bytes(4000, 1), b = bytes(4096, 2), c = bytes(10, 3), d = bytes(100, 4);
  tier.insert({1, 1}, a, 11);
  tier.insert({2, 2}, b, 22);
  tier.insert({3, 3}, c, 33);
  {
    auto hit = tier.find({1, 1}, 11);
    ASSERT_TRUE(hit);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), hit.bytes().begin()));
  }
  tier.insert({4, 4}, d, 44);  // evicts {2,2}: {1,1} was used more recently
  EXPECT_FALSE(tier.find({2, 2}, 22));
  EXPECT_TRUE(tier.find({1, 1}, 11));
  EXPECT_TRUE(tier.find({3, 3}, 33));
  EXPECT_EQ(tier.entries(), 3u);
}

TEST(DramTier, StaleChecksumIsAMissAndOversizedPayloadsAreNotKept) {
  auto made = DramTier::create(2 * 4096, 4096);
  ASSERT_OK(made);
  DramTier& tier = **made;
  auto a = bytes(64, 1);
  tier.insert({1, 1}, a, 11);
  EXPECT_FALSE(tier.find({1, 1}, 12));
  tier.insert({2, 2}, bytes(5000, 2), 22);
  EXPECT_FALSE(tier.find({2, 2}, 22));
}

TEST(DramTier, PinnedSlabsAreNeitherEvictedNorReusedUntilReleased) {
  auto made = DramTier::create(4096, 4096);  // one slab
  ASSERT_OK(made);
  DramTier& tier = **made;
  auto a = bytes(64, 1);
  tier.insert({1, 1}, a, 11);
  auto hit = tier.find({1, 1}, 11);
  ASSERT_TRUE(hit);
  tier.insert({2, 2}, bytes(64, 2), 22);  // no unpinned slab: not inserted
  EXPECT_FALSE(tier.find({2, 2}, 22));
  const Key128 k{1, 1};
  tier.erase(std::span(&k, 1));  // erased while read: bytes stay valid for the reader
  EXPECT_TRUE(std::equal(a.begin(), a.end(), hit.bytes().begin()));
  tier.insert({3, 3}, bytes(64, 3), 33);  // still pinned: nowhere to go
  EXPECT_FALSE(tier.find({3, 3}, 33));
  hit.reset();
  tier.insert({3, 3}, bytes(64, 3), 33);  // released: the slab is free again
  EXPECT_TRUE(tier.find({3, 3}, 33));
}

TEST(DramTier, AbandonedReservationsReturnTheirSlab) {
  auto made = DramTier::create(4096, 4096);
  ASSERT_OK(made);
  DramTier& tier = **made;
  auto r = tier.reserve();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(tier.reserve().has_value());
  tier.abandon(*r);
  EXPECT_TRUE(tier.reserve().has_value());
}

TEST(DramTier, CreateRefusesMoreThanAvailableMemoryNamingTheAskAndTheLimit) {
  auto tier = DramTier::create(kOneTiB, 4096);
  ASSERT_FALSE(tier.has_value());
  const Status& st = tier.error();
  EXPECT_EQ(st.code(), ErrorCode::kNoSpace) << st.to_string();
  EXPECT_NE(st.message().find("1099511627776 bytes"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("MemAvailable"), std::string::npos) << st.to_string();
}

// Runs in a forked child: maps a tier under an address-space limit just above what the process
// already maps, prints the error and exits 0 when it is kNoSpace with mmap's ENOMEM.
[[noreturn]] void create_under_address_space_limit(uint64_t ask) {
  uint64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t limit = pages * 4096 + (uint64_t{16} << 20);
  const struct rlimit r = {limit, limit};
  if (::setrlimit(RLIMIT_AS, &r) != 0) std::_Exit(2);
  auto tier = DramTier::create(ask, 4096);
  if (tier) std::_Exit(3);
  std::fprintf(stderr, "%s\n", tier.error().to_string().c_str());
  std::_Exit(
      tier.error().code() == ErrorCode::kNoSpace && tier.error().native_error() == ENOMEM ? 0 : 4);
}

TEST(DramTier, CreateReportsAFailedMappingWithErrnoAndTheAddressSpaceLimit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space: RLIMIT_AS cannot be lowered";
#endif
  // 256 MiB: far below MemAvailable, so only mmap can refuse it.
  EXPECT_EXIT(create_under_address_space_limit(uint64_t{256} << 20), ::testing::ExitedWithCode(0),
              "268435456 bytes.*mmap.*failed.*MemAvailable.*RLIMIT_AS.*errno 12");
}

TEST(DramTier, EngineOpenReportsATierLargerThanMemoryAsNoSpace) {
  TempDir dir;
  Options o = testing::small_options(dir.str(), testing::tiny_geometry());
  o.dram_bytes = kOneTiB;
  auto engine = Engine::open(o);
  ASSERT_FALSE(engine.has_value());
  EXPECT_EQ(engine.error().code(), ErrorCode::kNoSpace) << engine.error().to_string();
  EXPECT_NE(engine.error().message().find("1099511627776"), std::string::npos)
      << engine.error().to_string();
  EXPECT_NE(engine.error().message().find("MemAvailable"), std::string::npos)
      << engine.error().to_string();
}

}  // namespace
}  // namespace kvtier
