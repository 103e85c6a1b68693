// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/keys.hpp"

#include <gtest/gtest.h>

#include <random>

#include "test_util.hpp"

namespace kvtier {
namespace {

std::vector<Token> iota_tokens(size_t n, Token start = 0) {
  std::vector<Token> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = start + static_cast<Token>(i);
  return t;
}

TEST(Keys, ChainHasOneKeyPerChunkPlusPartialTail) {
  const Key128 ns = namespace_key(testing::tiny_geometry(), "");
  EXPECT_EQ(chain_keys(ns, iota_tokens(1024), 256).size(), 4u);
  EXPECT_EQ(chain_keys(ns, iota_tokens(1025), 256).size(), 5u);
  EXPECT_EQ(chain_keys(ns, iota_tokens(1), 256).size(), 1u);
}

TEST(Keys, SharedPrefixSharesKeysAndDivergenceChangesEveryLaterKey) {
  const Key128 ns = namespace_key(testing::tiny_geometry(), "");
  auto a = iota_tokens(1024);
  auto b = a;
  b[300] = 999999;  // inside chunk 1
  auto ka = chain_keys(ns, a, 256);
  auto kb = chain_keys(ns, b, 256);
  EXPECT_EQ(ka[0], kb[0]);
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(ka[i], kb[i]) << i;
}

TEST(Keys, SameChunkUnderDifferentPrefixGetsDifferentKey) {
  const Key128 ns = namespace_key(testing::tiny_geometry(), "");
  auto a = iota_tokens(512);
  auto b = iota_tokens(512);
  b[0] = -1;
  // Chunk 1 holds the same tokens in both, but its parent differs.
  EXPECT_NE(chain_keys(ns, a, 256)[1], chain_keys(ns, b, 256)[1]);
}

TEST(Keys, TenantsRanksAndModelsAreSeparateNamespaces) {
  auto g = testing::tiny_geometry();
  const Key128 base = namespace_key(g, "");
  EXPECT_NE(base, namespace_key(g, "tenant-a"));
  EXPECT_NE(namespace_key(g, "tenant-a"), namespace_key(g, "tenant-b"));
  EXPECT_NE(base, namespace_key(testing::tiny_geometry(256, 1, 2), ""));
  EXPECT_NE(namespace_key(testing::tiny_geometry(256, 0, 2), ""),
            namespace_key(testing::tiny_geometry(256, 1, 2), ""));
  EXPECT_NE(base, namespace_key(testing::tiny_geometry(128), ""));
  KvGeometry other = g;
  other.model_id = "tiny-2";
  EXPECT_NE(base, namespace_key(other, ""));
  auto tokens = iota_tokens(256);
  EXPECT_NE(chain_keys(base, tokens, 256)[0], chain_keys(namespace_key(g, "t"), tokens, 256)[0]);
}

TEST(Keys, ChunkPrefixKeysAreTheKeysOfEveryShorterChunk) {
  std::mt19937_64 rng(testing::test_seed());
  for (int round = 0; round < 20; ++round) {
    const Key128 parent{rng(), rng()};
    std::vector<Token> t(1 + rng() % 600);
    for (auto& x : t) x = static_cast<Token>(rng());
    const std::vector<Key128> keys = chunk_prefix_keys(parent, t);
    ASSERT_EQ(keys.size(), t.size());
    for (size_t n = 1; n <= t.size(); ++n)
      ASSERT_EQ(keys[n - 1], chunk_key(parent, std::span(t).first(n))) << n << " of " << t.size();
  }
  EXPECT_TRUE(chunk_prefix_keys(Key128{1, 2}, {}).empty());
}

TEST(Keys, PartialChunkKeyDependsOnItsLength) {
  const Key128 ns = namespace_key(testing::tiny_geometry(), "");
  auto t = iota_tokens(300);
  auto k300 = chain_keys(ns, t, 256);
  auto k299 = chain_keys(ns, std::span(t).first(299), 256);
  EXPECT_EQ(k300[0], k299[0]);
  EXPECT_NE(k300[1], k299[1]);
}

}  // namespace
TEST(Keys, ATpFreeStoresNamespaceNeverEqualsAStorePerRanks) {
  // A head group's geometry describes like a rank's of TP = groups: the version keeps them apart.
  const KvGeometry g = testing::tiny_geometry(64, 1, 2);
  EXPECT_NE(namespace_key(g, "", 2), namespace_key(g, "", 1));
  EXPECT_EQ(namespace_key(g, "t"), namespace_key(g, "t", 1));
}

}  // namespace kvtier
