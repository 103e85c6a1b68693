// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Save and restore over the space, not the presets: seeded random geometries, token counts near
// every boundary the data path cuts at, every host I/O path, contiguous and every paged layout and
// block size; every restored byte compared, and nothing valid may be dropped or even re-read.
// The CPU slice runs in CI; tests/gpu/gpu_property_test.cpp runs the same cases through a GPU.
// Replay one case: KVTIER_TEST_SEED=<seed> KVTIER_PROPERTY_CASE=<i>.
#include <gtest/gtest.h>

#include <cstring>

#include "compressible_kv.hpp"
#include "paged_reference.hpp"
#include "property_cases.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::HostKv;
using testing::PagedHost;
using testing::PropertyCase;

/// Whether `b` holds `a`'s rows of tokens [0, n) (both [2, layers, capacity, row]).
bool same_rows(const KvGeometry& g, const HostKv& a, const HostKv& b, uint64_t capacity,
               uint64_t n) {
  const uint64_t row = g.row_bytes();
  for (uint64_t line = 0; line < 2ull * g.layers; ++line) {
    const uint64_t at = line * capacity * row;
    if (std::memcmp(a.data.get() + at, b.data.get() + at, n * row) != 0) return false;
  }
  return true;
}

/// Runs one case on the host-emulated device; failures name the case.
void run_case(const PropertyCase& c) {
  testing::TempDir dir;
  auto opened = Engine::open(testing::property_options(c, dir.str()));
  if (!c.valid) {
    ASSERT_FALSE(opened) << "a geometry whose rows are not whole 8-byte words was accepted";
    EXPECT_EQ(opened.error().code(), ErrorCode::kInvalidArgument) << opened.error().to_string();
    return;
  }
  ASSERT_OK(opened);
  Engine& e = **opened;
  const KvGeometry& g = c.g;
  const std::vector<Token> tokens = synthetic::tokens(c.index + 1, c.tokens);
  HostKv source(g, c.capacity);
  synthetic::fill_kv(g, tokens, source.span(), c.capacity);
  if (c.coded) testing::bf16_like(source.span());

  auto save = [&](std::span<const Token> t) -> Result<SaveResult> {
    if (!c.paged) return e.save(t, source.view);
    const uint32_t blocks = static_cast<uint32_t>((t.size() + c.block_size - 1) / c.block_size);
    PagedHost paged(g, blocks + 3, c.block_size, c.layout);
    const auto table = testing::shuffled_blocks(t.size(), c.block_size, blocks + 3, c.index);
    testing::move_all(g, paged, table, source.data.get(), c.capacity, t.size(), /*to_paged=*/true);
    paged.view.block_table = table;
    return e.save(t, paged.view);
  };
  if (c.prefix_first) {
    ASSERT_OK(save(std::span(tokens).first(c.tokens / 2)));
  }
  ASSERT_OK(save(tokens));

  HostKv back(g, c.capacity);
  Result<RestoreResult> r;
  if (!c.paged) {
    r = e.restore(tokens, back.view);
  } else {
    const uint32_t blocks = static_cast<uint32_t>((c.tokens + c.block_size - 1) / c.block_size);
    PagedHost paged(g, blocks + 5, c.block_size, c.layout);
    const auto table = testing::shuffled_blocks(c.tokens, c.block_size, blocks + 5, c.index + 99);
    paged.view.block_table = table;
    r = e.restore(tokens, paged.view);
    testing::move_all(g, paged, table, back.data.get(), c.capacity, c.tokens, /*to_paged=*/false);
  }
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, c.tokens) << r->problem;
  EXPECT_EQ(r->checksum_misses, 0u) << "valid records dropped";
  EXPECT_EQ(r->recheck_kept, 0u)
      << "a valid record failed its check on the data path (kept by the re-read)";
  if (c.coded) {
    EXPECT_TRUE(same_rows(g, source, back, c.capacity, c.tokens)) << "restored bytes differ";
  } else {
    EXPECT_EQ(synthetic::first_mismatch(g, tokens, back.span(), c.capacity), c.tokens)
        << "restored bytes differ";
  }
  EXPECT_EQ(e.lookup(tokens).value(), c.tokens);
}

TEST(PropertyTest, EveryDrawnCaseRoundTripsByteExactOnTheHost) {
  const uint64_t seed = testing::test_seed();
  const testing::PropertyLimits lim = testing::property_limits({});
  const int64_t only = testing::property_only_case();
  for (uint64_t i = 0; i < lim.cases; ++i) {
    if (only >= 0 && static_cast<uint64_t>(only) != i) continue;
    const PropertyCase c = testing::draw_case(seed, i, lim);
    SCOPED_TRACE(c.describe() +
                 fmt::format(" | replay: KVTIER_TEST_SEED={} KVTIER_PROPERTY_CASE={}", seed, i));
    run_case(c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace kvtier
