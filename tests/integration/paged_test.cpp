// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Paged KV layouts on the host-emulated device, checked against an independent statement of each
// layout: restoring into the wrong place is the silent corruption this guards against.
#include <gtest/gtest.h>

#include "paged_reference.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

struct LayoutCase {
  PagedLayout layout;
  const char* name;
};

class PagedTest : public ::testing::TestWithParam<LayoutCase> {
 protected:
  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry(64);  // 2 layers, 2 heads, 64 dims, chunks of 64 tokens
};

TEST_P(PagedTest, RestoreIntoPagedPlacesEveryRowWhereTheLayoutSays) {
  auto e = Engine::open(testing::small_options(dir_.str(), g_));
  ASSERT_OK(e);
  const uint64_t n = 1000;  // 15 full chunks and a partial one; 63 blocks of 16, the last partial
  auto tokens = synthetic::tokens(5, n);
  testing::HostKv kv(g_, n);
  synthetic::fill_kv(g_, tokens, kv.span(), n);
  ASSERT_OK((*e)->save(tokens, kv.view));

  testing::PagedHost paged(g_, 80, 16, GetParam().layout);
  auto table = testing::shuffled_blocks(n, 16, 80, testing::test_seed());
  paged.view.block_table = table;
  auto r = (*e)->restore(tokens, paged.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, n);
  // Read the paged tensors back through the reference layout and compare with what was saved.
  testing::HostKv back(g_, n);
  testing::move_all(g_, paged, table, back.data.get(), n, n, /*to_paged=*/false);
  EXPECT_EQ(synthetic::first_mismatch(g_, tokens, back.span(), n), n);
}

// Checksums sum the payload's 8-byte words; a packed layout's head of 100 one-byte elements puts
// head boundaries inside words. Saved from and restored into the paged form, through pieces that
// split records, every record verifies and restores whole.
TEST_P(PagedTest, HeadsThatSplitChecksumWordsSaveRestoreAndVerify) {
  KvGeometry g = g_;
  g.model_id = "odd-heads";
  g.layers = 5;
  g.head_dim = 100;
  g.element_bytes = 1;
  g.chunk_tokens = 51;
  Options o = testing::small_options(dir_.str(), g);
  o.io_request_bytes = o.staging_bytes = 64 * 1024;  // pieces end inside records
  auto e = Engine::open(o);
  ASSERT_OK(e);
  const uint64_t n = 611;
  auto tokens = synthetic::tokens(9, n);
  testing::HostKv kv(g, n);
  synthetic::fill_kv(g, tokens, kv.span(), n);
  testing::PagedHost paged(g, 48, 16, GetParam().layout);
  auto table = testing::shuffled_blocks(n, 16, 48, testing::test_seed() + 2);
  paged.view.block_table = table;
  testing::move_all(g, paged, table, kv.data.get(), n, n, /*to_paged=*/true);
  ASSERT_OK((*e)->save(tokens, paged.view));
  auto v = (*e)->verify();
  ASSERT_OK(v);
  EXPECT_EQ(v->corrupt_records, 0u);
  testing::PagedHost back(g, 48, 16, GetParam().layout);
  back.view.block_table = table;
  auto r = (*e)->restore(tokens, back.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, n) << r->problem;
  EXPECT_EQ(r->checksum_misses, 0u);
  testing::HostKv out(g, n);
  testing::move_all(g, back, table, out.data.get(), n, n, /*to_paged=*/false);
  EXPECT_EQ(synthetic::first_mismatch(g, tokens, out.span(), n), n);
}

TEST_P(PagedTest, SaveFromPagedRestoresContiguousByteExact) {
  auto e = Engine::open(testing::small_options(dir_.str(), g_));
  ASSERT_OK(e);
  const uint64_t n = 777;
  auto tokens = synthetic::tokens(6, n);
  testing::HostKv kv(g_, n);
  synthetic::fill_kv(g_, tokens, kv.span(), n);
  testing::PagedHost paged(g_, 64, 32, GetParam().layout);
  auto table = testing::shuffled_blocks(n, 32, 64, testing::test_seed() + 1);
  paged.view.block_table = table;
  testing::move_all(g_, paged, table, kv.data.get(), n, n, /*to_paged=*/true);
  ASSERT_OK((*e)->save(tokens, paged.view));
  testing::HostKv out(g_, n);
  auto r = (*e)->restore(tokens, out.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, n);
  EXPECT_EQ(synthetic::first_mismatch(g_, tokens, out.span(), n), n);
}

TEST_P(PagedTest, SkippedBlocksAreVerifiedButNeverWritten) {
  auto e = Engine::open(testing::small_options(dir_.str(), g_));
  ASSERT_OK(e);
  const uint64_t n = 600;  // the serving engine already holds the first 160 tokens (10 blocks)
  auto tokens = synthetic::tokens(8, n);
  testing::HostKv kv(g_, n);
  synthetic::fill_kv(g_, tokens, kv.span(), n);
  ASSERT_OK((*e)->save(tokens, kv.view));
  testing::PagedHost paged(g_, 64, 16, GetParam().layout);
  auto table = testing::shuffled_blocks(n, 16, 64, testing::test_seed() + 2);
  const std::vector<int32_t> placed = table;
  for (size_t b = 0; b < 10; ++b) table[b] = kSkipBlock;
  paged.view.block_table = table;
  auto r = (*e)->restore(tokens, paged.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, n);
  EXPECT_EQ(r->checksum_misses, 0u);
  // Read back through the reference layout with the blocks' real homes: the skipped tokens' rows
  // are the untouched fill, every other row is the saved KV.
  testing::HostKv back(g_, n);
  testing::move_all(g_, paged, placed, back.data.get(), n, n, /*to_paged=*/false);
  EXPECT_TRUE(testing::restored_except_skipped(g_, back.data.get(), kv.data.get(), n, 160));
  // A save needs every token: skipping is refused there.
  EXPECT_EQ((*e)->save(synthetic::tokens(9, n), paged.view).error().code(),
            ErrorCode::kInvalidArgument);
}

TEST_P(PagedTest, BadBlockTablesAndShapesAreRefused) {
  auto e = Engine::open(testing::small_options(dir_.str(), g_));
  ASSERT_OK(e);
  auto tokens = synthetic::tokens(7, 100);
  testing::PagedHost paged(g_, 8, 16, GetParam().layout);
  std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 99};
  paged.view.block_table = table;
  EXPECT_EQ((*e)->restore(tokens, paged.view).error().code(), ErrorCode::kInvalidArgument);
  table.back() = 6;
  paged.view.layers.pop_back();
  EXPECT_EQ((*e)->restore(tokens, paged.view).error().code(), ErrorCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PagedTest,
                         ::testing::Values(LayoutCase{PagedLayout::kKvFirst, "KvFirst"},
                                           LayoutCase{PagedLayout::kBlockFirst, "BlockFirst"},
                                           LayoutCase{PagedLayout::kPackedHeads, "PackedHeads"},
                                           LayoutCase{PagedLayout::kPackedTokens, "PackedTokens"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvtier
