// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/dram_tier.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.hpp"

namespace kvtier {
namespace {

std::vector<std::byte> bytes(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 7 + seed);
  return v;
}

TEST(DramTier, HoldsPayloadsAndEvictsTheLeastRecentlyUsed) {
  DramTier tier(3 * 4096, 4096);  // three slabs
  auto a = bytes(4000, 1), b = bytes(4096, 2), c = bytes(10, 3), d = bytes(100, 4);
  tier.insert({1, 1}, a, 11);
  tier.insert({2, 2}, b, 22);
  tier.insert({3, 3}, c, 33);
  { auto hit = tier.find({1, 1}, 11); ASSERT_TRUE(hit); EXPECT_TRUE(std::equal(a.begin(), a.end(), hit.payload().begin())); }
  tier.insert({4, 4}, d, 44);  // evicts {2,2}: {1,1} was used more recently
  EXPECT_FALSE(tier.find({2, 2}, 22));
  EXPECT_TRUE(tier.find({1, 1}, 11));
  EXPECT_TRUE(tier.find({3, 3}, 33));
  EXPECT_EQ(tier.entries(), 3u);
}

TEST(DramTier, StaleChecksumIsAMissAndOversizedPayloadsAreNotKept) {
  DramTier tier(2 * 4096, 4096);
  auto a = bytes(64, 1);
  tier.insert({1, 1}, a, 11);
  EXPECT_FALSE(tier.find({1, 1}, 12));
  tier.insert({2, 2}, bytes(5000, 2), 22);
  EXPECT_FALSE(tier.find({2, 2}, 22));
}

TEST(DramTier, PinnedSlabsAreNeitherEvictedNorReusedUntilReleased) {
  DramTier tier(4096, 4096);  // one slab
  auto a = bytes(64, 1);
  tier.insert({1, 1}, a, 11);
  auto hit = tier.find({1, 1}, 11);
  ASSERT_TRUE(hit);
  tier.insert({2, 2}, bytes(64, 2), 22);  // no unpinned slab: not inserted
  EXPECT_FALSE(tier.find({2, 2}, 22));
  const Key128 k{1, 1};
  tier.erase(std::span(&k, 1));            // erased while read: bytes stay valid for the reader
  EXPECT_TRUE(std::equal(a.begin(), a.end(), hit.payload().begin()));
  tier.insert({3, 3}, bytes(64, 3), 33);   // still pinned: nowhere to go
  EXPECT_FALSE(tier.find({3, 3}, 33));
  hit.reset();
  tier.insert({3, 3}, bytes(64, 3), 33);   // released: the slab is free again
  EXPECT_TRUE(tier.find({3, 3}, 33));
}

TEST(DramTier, AbandonedReservationsReturnTheirSlab) {
  DramTier tier(4096, 4096);
  auto r = tier.reserve();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(tier.reserve().has_value());
  tier.abandon(*r);
  EXPECT_TRUE(tier.reserve().has_value());
}

}  // namespace
}  // namespace kvtier
