// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kvtier/geometry.hpp"

#include <gtest/gtest.h>

#include "test_util.hpp"

namespace kvtier {
namespace {

TEST(Geometry, Qwen3CoderWeighs96KiBPerTokenAnd48KiBPerRankAtTp2) {
  auto whole = geometry_for("qwen3-coder-30b-a3b");
  ASSERT_OK(whole);
  EXPECT_EQ(whole->bytes_per_token(), 96u * 1024);
  auto rank1 = geometry_for("qwen3-coder-30b-a3b", 1, 2);
  ASSERT_OK(rank1);
  EXPECT_EQ(rank1->bytes_per_token(), 48u * 1024);
  EXPECT_EQ(rank1->kv_heads, 2u);
  // ~9.8 GB for a 100K-token session across both ranks, as in the reference.
  EXPECT_NEAR(static_cast<double>(whole->bytes_for_tokens(100000)) / 1e9, 9.83, 0.01);
}

TEST(Geometry, Llama3_8bWeighs128KiBPerToken) {
  auto g = geometry_for("llama-3-8b");
  ASSERT_OK(g);
  EXPECT_EQ(g->bytes_per_token(), 128u * 1024);
}

TEST(Geometry, DeepSeekV3IsOneLatentOf576ElementsThatEveryRankOfAnyTpSizeHolds) {
  for (uint32_t world : {1u, 2u, 3u, 8u}) {
    auto g = geometry_for("deepseek-v3", world - 1, world);
    ASSERT_OK(g);
    EXPECT_EQ(g->kv_tensors, 1u);
    EXPECT_EQ(g->kv_heads, 1u);
    EXPECT_EQ(g->total_kv_heads(), 1u);
    EXPECT_EQ(g->bytes_per_token(), 61u * 576 * 2);  // the same bytes on every rank
  }
  EXPECT_EQ(geometry_for("deepseek-v3", 0, 0).error().code(), ErrorCode::kInvalidArgument);
}

TEST(Geometry, RejectsUnknownPresetAndIndivisibleWorld) {
  EXPECT_EQ(geometry_for("gpt-17").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(geometry_for("qwen3-coder-30b-a3b", 0, 3).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(geometry_for("qwen3-coder-30b-a3b", 0, 0).error().code(), ErrorCode::kInvalidArgument);
}

TEST(Geometry, ValidateRejectsZeroAbsurdAndOverflowingShapes) {
  KvGeometry g = testing::tiny_geometry();
  EXPECT_OK(g.validate());
  auto bad = [&](auto mutate) {
    KvGeometry b = g;
    mutate(b);
    return b.validate().code();
  };
  EXPECT_EQ(bad([](KvGeometry& b) { b.layers = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](KvGeometry& b) { b.head_dim = 1u << 30; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](KvGeometry& b) { b.element_bytes = 3; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](KvGeometry& b) { b.tp_rank = 1; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](KvGeometry& b) { b.model_id.clear(); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](KvGeometry& b) { b.chunk_tokens = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](KvGeometry& b) {
              b.head_dim = 3;
              b.kv_heads = 1;
              b.element_bytes = 1;
            }),
            ErrorCode::kInvalidArgument);
  // 1024 layers x 1024 heads x 4096 dims x 4 bytes x 65536 tokens would overflow a chunk's size.
  EXPECT_EQ(bad([](KvGeometry& b) {
              b.layers = 1024;
              b.kv_heads = 1024;
              b.head_dim = 4096;
              b.element_bytes = 4;
              b.chunk_tokens = 65536;
            }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier
