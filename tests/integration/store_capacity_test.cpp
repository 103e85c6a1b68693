// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Capacity and eviction as a user sees them across engine lifetimes: what a refused save leaves
// behind, which sessions eviction takes after reopens, and what the store's files weigh on disk.
#include <gtest/gtest.h>

#include <filesystem>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

class StoreCapacityTest : public ::testing::Test {
 protected:
  Options options() const {
    Options o = testing::small_options(dir_.str(), g_);
    o.capacity_bytes = uint64_t{64} << 20;
    return o;
  }
  std::unique_ptr<Engine> open(const Options& o) {
    auto e = Engine::open(o);
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  Result<SaveResult> save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    return e.save(tokens, kv.view);
  }
  /// Restores and checks every restored byte; returns how many tokens came back.
  uint64_t restored(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    auto r = e.restore(tokens, kv.view);
    EXPECT_TRUE(testing::is_ok(r));
    if (!r) return 0;
    EXPECT_EQ(synthetic::first_mismatch(g_, tokens.first(r->tokens_restored), kv.span(), tokens.size()),
              r->tokens_restored);
    return r->tokens_restored;
  }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
};

// The user's report: tiny, 64 MiB, sessions of 3,000 and 20,000 tokens, then one of 70,000 that
// cannot fit. Refusing it must not cost the two that were there.
TEST_F(StoreCapacityTest, RefusedOversizedSaveEvictsNothing) {
  const auto a = synthetic::tokens(7, 3000);
  const auto b = synthetic::tokens(1, 20000);
  const auto big = synthetic::tokens(2, 70000);
  { auto e = open(options()); ASSERT_OK(save(*e, a)); }
  { auto e = open(options()); ASSERT_OK(save(*e, b)); }
  {
    auto e = open(options());
    auto r = save(*e, big);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kCapacity) << r.error().to_string();
    EXPECT_EQ(e->stats().evicted_segments, 0u);
    EXPECT_EQ(restored(*e, a), a.size());
    EXPECT_EQ(restored(*e, b), b.size());
  }
  auto e = open(options());
  EXPECT_EQ(restored(*e, a), a.size());
  EXPECT_EQ(restored(*e, b), b.size());
}

}  // namespace
}  // namespace kvtier
