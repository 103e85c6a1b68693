// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The runs coded records are read in (into device memory): bounded, each drawing on every drive
// in proportion, each drive's records in their order and mergeable.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "engine/record_io.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(SpreadRuns, ASessionLaidDriveAfterDriveIsReadFromEveryDriveInEachRun) {
  // 8 drives of 40 records each, as a session's segments fill one drive, then the next; runs of a
  // quarter of the bytes. Consecutive runs would each touch two drives; these touch all eight.
  std::vector<uint32_t> drive;
  for (uint32_t d = 0; d < 8; ++d) drive.insert(drive.end(), 40, d);
  const std::vector<uint64_t> bytes(drive.size(), 6 * kMiB);
  const auto runs = spread_runs(drive, bytes, 80 * 6 * kMiB);
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& run : runs) {
    std::map<uint32_t, size_t> per_drive;
    for (size_t i : run) ++per_drive[drive[i]];
    EXPECT_EQ(per_drive.size(), 8u);
    for (const auto& [d, n] : per_drive) EXPECT_EQ(n, 10u) << "drive " << d;
  }
}

TEST(SpreadRuns, DrawnItemsKeepEveryPropertyOfTheRuns) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 500; ++trial) {
    const size_t n = rng() % 300;
    const uint32_t groups = 1 + static_cast<uint32_t>(rng() % 12);
    const uint64_t bound = 1 + rng() % (64 * kMiB);
    std::vector<uint32_t> group(n);
    std::vector<uint64_t> bytes(n);
    for (size_t i = 0; i < n; ++i) {
      // Runs of one group, as segments lie, or scattered: both orders occur.
      group[i] = trial % 2 == 0 ? static_cast<uint32_t>(i * groups / std::max<size_t>(n, 1))
                                : static_cast<uint32_t>(rng() % groups);
      // Raw records (0 bytes toward the bound), ordinary ones, and some over the bound.
      const unsigned kind = rng() % 10;
      bytes[i] = kind == 0 ? 0 : kind == 1 ? bound + rng() % kMiB : 1 + rng() % (bound / 4 + 1);
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " bound " << bound);
    const auto runs = spread_runs(group, bytes, bound);
    std::map<uint32_t, size_t> count, taken;
    for (size_t i = 0; i < n; ++i) ++count[group[i]];
    std::set<size_t> seen;
    std::map<uint32_t, size_t> last_of_group;
    for (size_t k = 0; k < runs.size(); ++k) {
      const auto& run = runs[k];
      ASSERT_FALSE(run.empty());
      uint64_t total = 0;
      for (size_t j = 0; j < run.size(); ++j) {
        const size_t i = run[j];
        ASSERT_LT(i, n);
        ASSERT_TRUE(seen.insert(i).second) << "item " << i << " twice";
        total += bytes[i];
        if (j > 0) {
          // Grouped, each group's items in order: within the run and across runs.
          const size_t prev = run[j - 1];
          ASSERT_TRUE(group[prev] < group[i] || (group[prev] == group[i] && prev < i));
        }
        if (last_of_group.contains(group[i])) {
          ASSERT_LT(last_of_group[group[i]], i);
        }
        last_of_group[group[i]] = i;
        ++taken[group[i]];
      }
      if (run.size() > 1) {
        EXPECT_LE(total, bound);
      }
      // Every run but the last leaves each group with its share of what was read so far: the
      // fraction read of the largest group, within a record and a half.
      if (k + 1 < runs.size()) {
        double fraction = 0;
        size_t most = 0;
        for (const auto& [g, c] : count) {
          if (c > most) {
            most = c;
            fraction = static_cast<double>(taken[g]) / static_cast<double>(c);
          }
        }
        for (const auto& [g, c] : count) {
          EXPECT_NEAR(static_cast<double>(taken[g]), fraction * static_cast<double>(c), 1.5)
              << "group " << g << " after run " << k;
        }
      }
    }
    EXPECT_EQ(seen.size(), n);
  }
}

}  // namespace
}  // namespace kvtier
