// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// From the drives' tunings to the engine's request size and staging: the examples issue 26
// measured, then drawn sets of drives (tuned, untuned, offline) against the rule's properties.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/tuning.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

Options defaults() {
  Options o;
  o.io_request_bytes = 16 * kMiB;
  o.staging_bytes = 128 * kMiB;
  return o;
}

DriveTuningInfo tuned(uint64_t request, uint32_t in_flight) {
  return {"d", request, in_flight, 1e9, "kept"};
}
DriveTuningInfo untuned() { return {"d", 0, 0, 0, "not tuned yet"}; }
DriveTuningInfo offline() { return {"d", 0, 0, 0, "not tuned: the drive is offline"}; }

TEST(IoFromTuning, NoTunedDriveKeepsTheDefaults) {
  const IoSettings s = io_from_tuning({untuned(), offline()}, defaults());
  EXPECT_EQ(s.request_bytes, 16 * kMiB);
  EXPECT_EQ(s.staging_bytes, 128 * kMiB);
  EXPECT_EQ(s.source, "defaults");
  EXPECT_EQ(s.drives.size(), 2u);
}

TEST(IoFromTuning, EightDrivesAtOneRequestEachGiveEachDriveItsPattern) {
  // Issue 26's best flags for eight RAM-backed drives (4M requests, 32M staging), found per drive.
  const IoSettings s =
      io_from_tuning(std::vector<DriveTuningInfo>(8, tuned(4 * kMiB, 1)), defaults());
  EXPECT_EQ(s.request_bytes, 4 * kMiB);
  EXPECT_EQ(s.staging_bytes, 32 * kMiB);
  EXPECT_EQ(s.source, "tuned");
}

TEST(IoFromTuning, ATieTakesTheSmallerRequestAndKeepsEachDrivesBytesInFlight) {
  const IoSettings s = io_from_tuning({tuned(4 * kMiB, 2), tuned(kMiB, 4)}, defaults());
  EXPECT_EQ(s.request_bytes, kMiB);
  EXPECT_EQ(s.staging_bytes, 12 * kMiB);  // 8 MiB for the first drive, 4 for the second
}

TEST(IoFromTuning, OneDriveAtOneRequestStillGetsTwoSlots) {
  const IoSettings s = io_from_tuning({tuned(4 * kMiB, 1)}, defaults());
  EXPECT_EQ(s.request_bytes, 4 * kMiB);
  EXPECT_EQ(s.staging_bytes, 8 * kMiB);
}

TEST(IoFromTuning, AnUntunedDriveCountsAsTheTunedOnesMeanAndAnOfflineOneNotAtAll) {
  const IoSettings two = io_from_tuning({tuned(4 * kMiB, 2), untuned()}, defaults());
  EXPECT_EQ(two.staging_bytes, 16 * kMiB);
  const IoSettings gone = io_from_tuning({tuned(4 * kMiB, 2), offline()}, defaults());
  EXPECT_EQ(gone.staging_bytes, 8 * kMiB);
}

// A TP-free model's stores share a tuning's staging: whole requests each, rounded up, two at least.
TEST(TunedShare, EachStoreTakesWholeRequestsRoundedUpTwoAtLeastAndTheStoresTogetherTheWhole) {
  auto staging = [](uint64_t staging, uint64_t request, uint32_t stores) {
    const StoreShare each = tuned_share(staging, request, stores);
    EXPECT_EQ(each.request_bytes, request);  // nowhere near the cap: the request as found
    return each.staging_bytes;
  };
  EXPECT_EQ(staging(16 * kMiB, kMiB, 8), 2 * kMiB);
  EXPECT_EQ(staging(11 * kMiB, kMiB, 4), 3 * kMiB);  // 2.75 requests: three
  EXPECT_EQ(staging(17 * kMiB, kMiB, 8), 3 * kMiB);
  EXPECT_EQ(staging(11 * kMiB, kMiB, 8), 2 * kMiB);     // 1.4 requests: the floor, two
  EXPECT_EQ(staging(2 * kMiB, 4 * kMiB, 8), 8 * kMiB);  // two requests at least
  EXPECT_EQ(staging(8 * kMiB, kMiB, 0), 8 * kMiB);      // no stores counts as one
  // 1 GiB in 16 MiB requests over 3 stores: 22 requests each would pass the cap, 21 do not.
  EXPECT_EQ(staging(kMaxTunedStaging, 16 * kMiB, 3), 21 * 16 * kMiB);
}

// Two requests of 16 MiB for each of 129 stores (a hybrid model of 64 KV heads at max_tp 64) would
// be 4 GiB: the requests shrink so that the stores keep to the 1 GiB cap.
TEST(TunedShare, SoManyStoresThatTwoRequestsEachPassTheCapReadWithSmallerRequests) {
  const StoreShare each = tuned_share(kMaxTunedStaging, 16 * kMiB, 129);
  EXPECT_LT(each.request_bytes, 16 * kMiB);
  EXPECT_EQ(each.request_bytes % 4096, 0u);
  EXPECT_EQ(each.staging_bytes, 2 * each.request_bytes);
  EXPECT_LE(129 * each.staging_bytes, kMaxTunedStaging);
  EXPECT_GT(129 * (each.staging_bytes + 2 * 4096), kMaxTunedStaging);  // the most that fits
}

TEST(TunedShare, DrawnSharesKeepTheCapAndTheFloor) {
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 4000; ++trial) {
    const uint64_t request = (uint64_t{1} << (12 + rng() % 13)) * (1 + rng() % 3);
    const uint64_t staging = request * (1 + rng() % 64);
    const auto stores = static_cast<uint32_t>(1 + rng() % (trial % 2 == 0 ? 48 : 300));
    const StoreShare each = tuned_share(staging, request, stores);
    SCOPED_TRACE(::testing::Message() << staging << " over " << stores << " at " << request);
    EXPECT_EQ(each.request_bytes % 4096, 0u);
    EXPECT_GE(each.request_bytes, 4096u);
    EXPECT_LE(each.request_bytes, request);
    EXPECT_EQ(each.staging_bytes % each.request_bytes, 0u);
    EXPECT_GE(each.staging_bytes, 2 * each.request_bytes);
    // The request shrinks only where two of it each would pass the cap; the stores then keep to
    // it (4 KiB requests are the least: only past 131,072 stores could they not).
    if (each.request_bytes < request) {
      EXPECT_GT(2 * stores * request, kMaxTunedStaging);
      EXPECT_EQ(each.staging_bytes, 2 * each.request_bytes);
    }
    EXPECT_LE(each.staging_bytes * stores, kMaxTunedStaging);
    // The stores keep what the drives want, less than one more request each, when it fits.
    if (each.request_bytes == request) {
      EXPECT_GE(each.staging_bytes * stores,
                std::min(staging, kMaxTunedStaging - stores * request + 1));
      EXPECT_LT(each.staging_bytes * stores,
                std::max(staging + stores * request, 2 * stores * request + 1));
    }
  }
}

// The defaults (or sizes asked for) split over a rank's stores: an equal part each, one request
// at least, and requests small enough that one each keeps to the rank's staging.
TEST(SplitShare, DrawnSplitsKeepTheRanksStagingWithOneRequestEachAtLeast) {
  EXPECT_EQ(split_share(128 * kMiB, 16 * kMiB, 4).staging_bytes, 32 * kMiB);
  EXPECT_EQ(split_share(128 * kMiB, 16 * kMiB, 4).request_bytes, 16 * kMiB);
  // 17 stores (a hybrid model: 8 groups, their windows, the state) and 16 MiB requests: one each
  // would be 272 MiB against 128 MiB.
  const StoreShare hybrid = split_share(128 * kMiB, 16 * kMiB, 17);
  EXPECT_LE(17 * hybrid.staging_bytes, 128 * kMiB);
  EXPECT_EQ(hybrid.staging_bytes, hybrid.request_bytes);
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 4000; ++trial) {
    const uint64_t request = (uint64_t{1} << (12 + rng() % 13)) * (1 + rng() % 3);
    const uint64_t staging = request * (1 + rng() % 64);
    const auto stores = static_cast<uint32_t>(1 + rng() % 300);
    const StoreShare each = split_share(staging, request, stores);
    SCOPED_TRACE(::testing::Message() << staging << " over " << stores << " at " << request);
    EXPECT_EQ(each.request_bytes % 4096, 0u);
    EXPECT_GE(each.request_bytes, 4096u);
    EXPECT_LE(each.request_bytes, request);
    EXPECT_GE(each.staging_bytes, each.request_bytes);
    EXPECT_EQ(each.staging_bytes % 4096, 0u);
    // Within the rank's staging, unless even 4 KiB each is more.
    EXPECT_LE(each.staging_bytes * stores, std::max<uint64_t>(staging, 4096 * stores));
    if (each.request_bytes < request) {
      EXPECT_GT(stores * request, staging);
    }
  }
}

TEST(IoFromTuning, DrawnDriveSetsKeepTheRulesProperties) {
  std::mt19937_64 rng(testing::test_seed());
  const uint64_t sizes[] = {kMiB / 4, kMiB, 2 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB, 64 * kMiB};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<DriveTuningInfo> drives(1 + rng() % 12);
    std::map<uint64_t, size_t> votes;
    uint64_t own_bytes = 0, untuned_available = 0;
    for (DriveTuningInfo& d : drives) {
      const unsigned kind = rng() % 10;
      if (kind == 0) {
        d = offline();
      } else if (kind < 3) {
        d = untuned();
        ++untuned_available;
      } else {
        d = tuned(sizes[rng() % std::size(sizes)], 1 + static_cast<uint32_t>(rng() % 32));
        ++votes[d.request_bytes];
        own_bytes += d.request_bytes * d.in_flight;
      }
    }
    const IoSettings s = io_from_tuning(drives, defaults());
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": " << drives.size() << " drives");
    ASSERT_EQ(s.drives.size(), drives.size());
    if (votes.empty()) {
      EXPECT_EQ(s.source, "defaults");
      EXPECT_EQ(s.request_bytes, 16 * kMiB);
      EXPECT_EQ(s.staging_bytes, 128 * kMiB);
      continue;
    }
    EXPECT_EQ(s.source, "tuned");
    ASSERT_TRUE(votes.count(s.request_bytes)) << "a request size no drive chose";
    for (const auto& [size, n] : votes) {
      EXPECT_TRUE(n < votes[s.request_bytes] ||
                  (n == votes[s.request_bytes] && size >= s.request_bytes))
          << size << " had " << n << " votes against " << votes[s.request_bytes];
    }
    EXPECT_EQ(s.staging_bytes % s.request_bytes, 0u);
    EXPECT_GE(s.staging_bytes, std::min(2 * s.request_bytes, uint64_t{1} << 30));
    EXPECT_LE(s.staging_bytes, uint64_t{1} << 30);
    const uint64_t cap = (uint64_t{1} << 30) / s.request_bytes * s.request_bytes;
    // Every tuned drive keeps at least its own bytes in flight (rounded up to whole requests),
    // unless the 1 GiB bound stops it; an untuned drive adds at most the largest tuned share.
    EXPECT_GE(s.staging_bytes, std::min(own_bytes, cap));
    const uint64_t tuned_count =
        drives.size() - untuned_available -
        static_cast<uint64_t>(std::count_if(drives.begin(), drives.end(), [](auto& d) {
          return d.state == "not tuned: the drive is offline";
        }));
    EXPECT_LE(
        s.staging_bytes,
        own_bytes + tuned_count * s.request_bytes +
            untuned_available * (own_bytes / s.request_bytes + tuned_count + 1) * s.request_bytes);
    // One more untuned drive never lowers the staging.
    std::vector<DriveTuningInfo> more = drives;
    more.push_back(untuned());
    EXPECT_GE(io_from_tuning(more, defaults()).staging_bytes, s.staging_bytes);
  }
}

}  // namespace
}  // namespace kvtier
