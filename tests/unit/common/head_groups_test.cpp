// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/head_groups.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kvtier {
namespace {

bool vllm_accepts(uint32_t heads, uint32_t tp) { return heads % tp == 0 || tp % heads == 0; }

// vLLM's assignment: heads / tp consecutive heads per rank, or with more ranks than heads, head
// rank * heads / tp on each rank.
uint32_t vllm_first_head(uint32_t heads, uint32_t rank, uint32_t tp) {
  return tp <= heads ? rank * (heads / tp) : rank * heads / tp;
}

// Every accepted (heads, max_tp, tp): each rank holds exactly vLLM's heads, its groups cover
// exactly those heads, every group is held and written by exactly one rank; refusals exactly where
// vLLM refuses or where the store's groups cannot be dealt whole.
void check_split(uint32_t heads, uint32_t max_tp, uint32_t tp, size_t& accepted) {
  const HeadSplit split{heads, max_tp};
  const uint32_t groups = split.groups();
  ASSERT_EQ(heads % groups, 0u);
  std::vector<uint32_t> writers(groups, 0), holders(groups, 0);
  bool any_accepted = false, any_refused = false;
  for (uint32_t rank = 0; rank < tp; ++rank) {
    auto got = rank_heads(split, rank, tp);
    if (!got) {
      any_refused = true;
      EXPECT_EQ(got.error().code(), ErrorCode::kInvalidArgument);
      continue;
    }
    any_accepted = true;
    SCOPED_TRACE(::testing::Message()
                 << "heads " << heads << " max_tp " << max_tp << " tp " << tp << " rank " << rank);
    EXPECT_EQ(got->heads, tp <= heads ? heads / tp : 1u);
    EXPECT_EQ(got->first_head, vllm_first_head(heads, rank, tp));
    EXPECT_EQ(got->first_group * split.heads_per_group(), got->first_head);
    EXPECT_EQ(got->groups * split.heads_per_group(), got->heads);
    for (uint32_t g = got->first_group; g < got->first_group + got->groups; ++g) {
      ASSERT_LT(g, groups);
      ++holders[g];
      writers[g] += got->writes ? 1 : 0;
    }
  }
  EXPECT_FALSE(any_accepted && any_refused) << "ranks of one TP group disagree";
  const bool must_accept = vllm_accepts(heads, tp) && max_tp % tp == 0;
  if (must_accept) {
    EXPECT_TRUE(any_accepted) << heads << " heads, max_tp " << max_tp << ", tp " << tp;
  }
  if (!vllm_accepts(heads, tp)) {
    EXPECT_FALSE(any_accepted);
  }
  // Beyond the sizes max_tp divides: taken exactly where each rank's heads are whole groups.
  const uint32_t per_group = heads / groups;
  const bool whole_groups = tp <= heads ? (heads / tp) % per_group == 0 : per_group == 1;
  EXPECT_EQ(any_accepted, vllm_accepts(heads, tp) && whole_groups)
      << heads << " heads, max_tp " << max_tp << ", tp " << tp;
  if (!any_accepted) return;
  ++accepted;
  for (uint32_t g = 0; g < groups; ++g) {
    EXPECT_EQ(writers[g], 1u) << "group " << g;
    EXPECT_EQ(holders[g], tp <= heads ? 1u : tp / heads) << "group " << g;
  }
}

TEST(HeadGroups, EveryTpSizeHoldsVllmsHeadsAndEveryGroupHasOneWriter) {
  size_t accepted = 0, tried = 0;
  for (uint32_t heads : {1u, 2u, 3u, 4u, 6u, 8u, 12u, 16u, 32u, 40u, 64u, 128u}) {
    for (uint32_t max_tp : {1u, 2u, 4u, 8u, 16u}) {
      for (uint32_t tp = 1; tp <= 32; ++tp, ++tried) check_split(heads, max_tp, tp, accepted);
    }
  }
  std::mt19937 rng(20261204);
  for (int i = 0; i < 2000; ++i, ++tried) {
    check_split(1 + rng() % 256, 1 + rng() % 32, 1 + rng() % 64, accepted);
  }
  RecordProperty("accepted", static_cast<int>(accepted));
  EXPECT_GT(accepted, tried / 10);
}

TEST(HeadGroups, MlaLatentIsOneGroupWrittenByRankZeroOnlyAtEveryTpSize) {
  for (uint32_t tp : {1u, 2u, 4u, 8u, 16u}) {
    for (uint32_t rank = 0; rank < tp; ++rank) {
      auto got = rank_heads({1, 8}, rank, tp);
      ASSERT_TRUE(got.has_value()) << got.error().to_string();
      EXPECT_EQ(got->first_group, 0u);
      EXPECT_EQ(got->groups, 1u);
      EXPECT_EQ(got->writes, rank == 0);
    }
  }
}

TEST(HeadGroups, QwenCoderShapeAtTp8ReplicatesEachHeadOnTwoRanks) {
  // 4 KV heads: TP 8 gives ranks 2k and 2k+1 head k; only 2k writes it.
  for (uint32_t rank = 0; rank < 8; ++rank) {
    auto got = rank_heads({4, 8}, rank, 8);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->first_head, rank / 2);
    EXPECT_EQ(got->writes, rank % 2 == 0);
  }
}

TEST(HeadGroups, RefusalsSayWhy) {
  auto split_head = rank_heads({6, 8}, 0, 4);
  ASSERT_FALSE(split_head.has_value());
  EXPECT_NE(split_head.error().message().find("split across ranks"), std::string::npos);
  auto too_many = rank_heads({64, 8}, 0, 16);
  ASSERT_FALSE(too_many.has_value());
  EXPECT_NE(too_many.error().message().find("8 groups cannot be dealt evenly to 16 ranks"),
            std::string::npos)
      << too_many.error().message();
  auto outside = rank_heads({4, 8}, 4, 4);
  ASSERT_FALSE(outside.has_value());
  EXPECT_NE(outside.error().message().find("not in the group"), std::string::npos);
}

}  // namespace
}  // namespace kvtier
