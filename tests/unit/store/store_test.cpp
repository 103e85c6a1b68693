// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store without an engine: reservations by several writers, admission, eviction order.
#include "store/store.hpp"

#include <gtest/gtest.h>

#include "store_util.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

class StoreTest : public ::testing::Test {
 protected:
  Options options() const {
    Options o = testing::small_options(dir_.str(), testing::tiny_geometry());
    o.capacity_bytes = 64 * kMiB;
    o.segment_bytes = 16 * kMiB;
    return *o.resolved();
  }
  std::unique_ptr<Store> open() {
    auto s = Store::open(testing::store_config(options()), log_);
    EXPECT_TRUE(testing::is_ok(s));
    return s ? std::move(*s) : nullptr;
  }
  /// Reserves `count` records of `bytes` each and commits them under keys from `first_key` on.
  static void store_records(Store& s, uint64_t first_key, size_t count, uint64_t bytes) {
    std::vector<uint64_t> sizes(count, bytes);
    auto placed = s.reserve(sizes);
    ASSERT_OK(placed);
    std::vector<RecordMeta> records;
    for (size_t i = 0; i < count; ++i) records.push_back(meta(first_key + i, (*placed)[i], bytes));
    ASSERT_OK(s.commit(records, *placed));
  }
  static RecordMeta meta(uint64_t key, const Placement& p, uint64_t bytes) {
    RecordMeta m;
    m.key = {key, key};
    m.segment = p.file->id;
    m.offset = p.offset;
    m.token_count = 1;
    m.payload_bytes = bytes - kBlock;
    m.sequence = p.sequence;
    return m;
  }

  testing::TempDir dir_;
  Logger log_{LogSink{}, LogLevel::kOff};
};

TEST_F(StoreTest, ReservationThatCannotFitBesideOtherWritersEvictsNothing) {
  auto s = open();
  store_records(*s, 100, 4, 4 * kMiB);  // one full segment of committed records
  // Another writer holds two fresh segments while it writes.
  auto held = s->reserve(std::vector<uint64_t>(8, 4 * kMiB));
  ASSERT_OK(held);
  // Three more segments cannot fit beside the writer's two, even without the committed one.
  auto refused = s->reserve(std::vector<uint64_t>(12, 4 * kMiB));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kCapacity);
  EXPECT_NE(refused.error().message().find("in use by writers"), std::string::npos)
      << refused.error().to_string();
  for (uint64_t k = 100; k < 104; ++k) EXPECT_TRUE(s->contains({k, k})) << k;
  Stats stats;
  s->fill_stats(stats);
  EXPECT_EQ(stats.evicted_segments, 0u);
  s->abort(*held);
  // With the writer gone the same request fits by evicting the committed segment.
  auto fits = s->reserve(std::vector<uint64_t>(12, 4 * kMiB));
  ASSERT_OK(fits);
  s->abort(*fits);
}

}  // namespace
}  // namespace kvtier
