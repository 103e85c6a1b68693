// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A store over several directories (one per drive), without an engine: placement, capacity per
// drive, a drive missing at open (its records kept as misses, served again once it is back),
// drives listed in another order, and the lists a store refuses.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/posix.hpp"
#include "store/store.hpp"
#include "store_util.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = uint64_t{1} << 20;

class DrivesTest : public ::testing::Test {
 protected:
  /// Drive i's root directory.
  std::string root(size_t i) const {
    return (dir_.path() / fmt::format("{}drive{}", prefix_, i)).string();
  }
  std::string rank_dir(size_t i) const { return root(i) + "/rank0of1"; }

  Options options(std::vector<size_t> drives, uint64_t capacity = 256 * kMiB) const {
    Options o = testing::small_options(root(drives[0]), testing::tiny_geometry());
    for (size_t i = 1; i < drives.size(); ++i) o.extra_roots.push_back(root(drives[i]));
    o.capacity_bytes = capacity;
    o.segment_bytes = 16 * kMiB;
    return *o.resolved();
  }
  Result<std::unique_ptr<Store>> open(std::vector<size_t> drives, uint64_t capacity = 256 * kMiB) {
    return Store::open(testing::store_config(options(std::move(drives), capacity)), log_);
  }
  /// A valid record of `tokens` tokens (reopening checks sizes against the geometry).
  uint64_t record_size(uint32_t tokens) const {
    return kBlock + align_up(geometry_.bytes_for_tokens(tokens));
  }
  /// Stores `count` records of 240 tokens under keys from `first`; returns key -> drive.
  std::map<uint64_t, uint32_t> store(Store& s, uint64_t first, size_t count) {
    std::map<uint64_t, uint32_t> where;
    std::vector<uint64_t> sizes(count, record_size(240));
    auto placed = s.reserve(sizes);
    EXPECT_OK(placed);
    if (!placed) return where;
    std::vector<RecordMeta> records;
    for (size_t i = 0; i < count; ++i) {
      const Placement& p = (*placed)[i];
      RecordMeta m;
      m.key = {first + i, ~(first + i)};
      m.segment = p.file->id;
      m.offset = p.offset;
      m.token_count = 240;
      m.payload_bytes = geometry_.bytes_for_tokens(240);
      m.sequence = p.sequence;
      records.push_back(m);
      where[first + i] = p.file->drive;
    }
    EXPECT_OK(s.commit(records, *placed));
    return where;
  }
  static size_t segment_files(const std::string& dir) {
    auto ids = list_segments(dir);
    return ids ? ids->size() : 0;
  }
  static Stats stats(Store& s) {
    Stats st;
    s.fill_stats(st);
    return st;
  }

  testing::TempDir dir_;
  std::string prefix_;
  KvGeometry geometry_ = testing::tiny_geometry();
  Logger log_{LogSink{}, LogLevel::kOff};
};

TEST_F(DrivesTest, NewSegmentsSpreadEvenlyOverTheDrives) {
  for (size_t drives : {2, 3, 4}) {
    prefix_ = fmt::format("of{}-", drives);
    std::vector<size_t> list(drives);
    for (size_t i = 0; i < drives; ++i) list[i] = i;
    auto s = open(list);
    ASSERT_OK(s);
    // 15 records of ~244 KiB fill about a 16 MiB segment: 8 segments' worth, in several saves.
    for (uint64_t save = 0; save < 8; ++save) store(**s, save * 1000, 65);
    std::vector<size_t> per_drive;
    for (size_t i = 0; i < drives; ++i) per_drive.push_back(segment_files(rank_dir(i)));
    const auto [lo, hi] = std::minmax_element(per_drive.begin(), per_drive.end());
    EXPECT_LE(*hi - *lo, 1u) << drives << " drives";
    EXPECT_GE(*lo, 1u) << drives << " drives";
    EXPECT_EQ(stats(**s).drives, drives);
    EXPECT_EQ(stats(**s).drives_offline, 0u);
  }
}

// Two ranks of one model over the same eight drives, five segments each: without a starting place
// of their own both would fill the same five drives, and a restore by both ranks at once would
// leave three drives idle.
TEST_F(DrivesTest, RanksSharingTheDrivesSpreadTheirSegmentsOverAllOfThem) {
  constexpr size_t kDrives = 8;
  std::vector<size_t> list(kDrives);
  for (size_t i = 0; i < kDrives; ++i) list[i] = i;
  std::set<size_t> used;
  std::vector<std::set<size_t>> by_rank(2);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    geometry_ = testing::tiny_geometry(256, rank, 2);
    Options o = options(list);
    o.geometry = geometry_;
    auto s = Store::open(testing::store_config(o), log_);
    ASSERT_OK(s);
    // Each save fills one 16 MiB segment (a rank's records are half the model's).
    const size_t per_segment = 16 * kMiB / record_size(240);
    for (uint64_t save = 0; save < 5; ++save) store(**s, save * 1000, per_segment);
    for (size_t i = 0; i < kDrives; ++i) {
      if (segment_files(fmt::format("{}/rank{}of2", root(i), rank)) == 0) continue;
      used.insert(i);
      by_rank[rank].insert(i);
    }
  }
  EXPECT_EQ(by_rank[0].size(), 5u);
  EXPECT_EQ(by_rank[1].size(), 5u);
  EXPECT_EQ(used.size(), kDrives) << "the ranks' segments share too few drives";
}

// A session of fewer segments than drives starts at the rank's own place, the home drive (which
// also holds the index files) included: drawn drive counts, segment counts and ranks.
TEST_F(DrivesTest, FewerSegmentsThanDrivesFillTheDrivesFromTheRanksOwnPlace) {
  std::mt19937_64 rng(testing::test_seed());
  for (int round = 0; round < 6; ++round) {
    const size_t drives = 2 + rng() % 5;
    const size_t segments = 1 + rng() % (drives - 1);
    const uint32_t world = 1u + static_cast<uint32_t>(rng() % 2);  // the tiny model splits over 2
    const uint32_t rank = static_cast<uint32_t>(rng() % world);
    prefix_ = fmt::format("r{}-", round);
    std::vector<size_t> list(drives);
    for (size_t i = 0; i < drives; ++i) list[i] = i;
    geometry_ = testing::tiny_geometry(256, rank, world);
    Options o = options(list);
    o.geometry = geometry_;
    auto s = Store::open(testing::store_config(o), log_);
    ASSERT_OK(s);
    const size_t per_segment = 16 * kMiB / record_size(240);
    for (uint64_t save = 0; save < segments; ++save) store(**s, save * 1000, per_segment);
    const size_t first = drives * rank / world;
    for (size_t i = 0; i < drives; ++i) {
      const size_t files = segment_files(fmt::format("{}/rank{}of{}", root(i), rank, world));
      const bool expected = (i + drives - first) % drives < segments;
      EXPECT_EQ(files, expected ? 1u : 0u) << "drive " << i << " of " << drives << ", " << segments
                                           << " segments, rank " << rank << " of " << world;
    }
  }
}

TEST_F(DrivesTest, OneDirectoryStoreWritesNoDriveFiles) {
  auto s = open({0});
  ASSERT_OK(s);
  store(**s, 1, 40);
  EXPECT_FALSE(fs::exists(rank_dir(0) + "/" + kDrivesName));
  EXPECT_FALSE(fs::exists(rank_dir(0) + "/" + kDriveName));
  EXPECT_EQ(stats(**s).drives, 1u);
}

TEST_F(DrivesTest, MissingDriveKeepsItsRecordsAsMissesUntilItIsBack) {
  std::map<uint64_t, uint32_t> where;
  {
    auto s = open({0, 1});
    ASSERT_OK(s);
    where = store(**s, 1, 200);  // about 13 segments over two drives
  }
  std::set<uint32_t> drives_used;
  for (auto [key, drive] : where) drives_used.insert(drive);
  ASSERT_EQ(drives_used.size(), 2u);
  fs::rename(rank_dir(1), dir_.path() / "away");
  {
    auto s = open({0, 1});
    ASSERT_OK(s);
    const Stats st = stats(**s);
    EXPECT_EQ(st.drives_offline, 1u);
    EXPECT_FALSE(st.drive_problem.empty());
    size_t on_missing = 0;
    for (auto [key, drive] : where) {
      const bool found = (*s)->find({key, ~key}).has_value();
      EXPECT_EQ(found, drive == 0) << "key " << key << " on drive " << drive;
      on_missing += drive == 1 ? 1 : 0;
    }
    EXPECT_EQ(stats(**s).offline_records, on_missing);
    EXPECT_EQ(stats(**s).drive_misses, on_missing);
    // Saves go on meanwhile, to the drive that is there, under ids the missing drive does not hold.
    for (auto [key, drive] : store(**s, 5000, 60)) EXPECT_EQ(drive, 0u);
    EXPECT_FALSE(fs::exists(rank_dir(1))) << "a missing drive's directory is not made anew";
  }
  fs::rename(dir_.path() / "away", rank_dir(1));
  // Back, and listed in the other order: the drive holding the index is found by its files.
  auto s = open({1, 0});
  ASSERT_OK(s);
  for (auto [key, drive] : where) EXPECT_TRUE((*s)->find({key, ~key}).has_value()) << "key " << key;
  for (uint64_t key = 5000; key < 5060; ++key)
    EXPECT_TRUE((*s)->find({key, ~key}).has_value()) << "key " << key;
  EXPECT_EQ(stats(**s).drives_offline, 0u);
  EXPECT_EQ(stats(**s).offline_records, 0u);
}

TEST_F(DrivesTest, DriveLeftOutOfTheListIsOfflineNotForgotten) {
  std::map<uint64_t, uint32_t> where;
  {
    auto s = open({0, 1, 2});
    ASSERT_OK(s);
    where = store(**s, 1, 150);
  }
  {
    auto s = open({0, 2});  // drive 1 left out
    ASSERT_OK(s);
    EXPECT_EQ(stats(**s).drives, 3u);
    EXPECT_EQ(stats(**s).drives_offline, 1u);
    for (auto [key, drive] : where) EXPECT_EQ((*s)->find({key, ~key}).has_value(), drive != 1);
  }
  auto s = open({2, 1, 0});
  ASSERT_OK(s);
  for (auto [key, drive] : where) EXPECT_TRUE((*s)->find({key, ~key}).has_value());
}

TEST_F(DrivesTest, DriveAddedLaterTakesNewSegments) {
  {
    auto s = open({0});
    ASSERT_OK(s);
    store(**s, 1, 60);
  }
  auto s = open({0, 1});
  ASSERT_OK(s);
  EXPECT_EQ(stats(**s).drives, 2u);
  auto where = store(**s, 1000, 120);
  std::set<uint32_t> used;
  for (auto [key, drive] : where) used.insert(drive);
  EXPECT_TRUE(used.contains(1));
  for (uint64_t key = 1; key < 61; ++key) EXPECT_TRUE((*s)->find({key, ~key}).has_value());
}

TEST_F(DrivesTest, MarkedDriveTheListDoesNotNameYetIsAdopted) {
  // A crash between writing a new drive's DRIVE.json and DRIVES.json naming it.
  std::map<uint64_t, uint32_t> where;
  {
    auto s = open({0, 1});
    ASSERT_OK(s);
    where = store(**s, 1, 100);
  }
  const std::string list = rank_dir(0) + "/" + kDrivesName;
  auto j = nlohmann::json::parse(*read_file(list));
  j["drives"].erase(1);
  std::ofstream(list) << j.dump();
  auto s = open({0, 1});
  ASSERT_OK(s);
  EXPECT_EQ(stats(**s).drives_offline, 0u);
  for (auto [key, drive] : where) EXPECT_TRUE((*s)->find({key, ~key}).has_value());
  EXPECT_EQ(nlohmann::json::parse(*read_file(list))["drives"].size(), 2u);
}

TEST_F(DrivesTest, CapacityIsPerDrive) {
  // 80 MiB per drive: four 16 MiB segments besides the index files, five on a drive without them.
  auto s = open({0, 1}, 80 * kMiB);
  ASSERT_OK(s);
  for (uint64_t save = 0; save < 40; ++save) store(**s, save * 1000, 30);  // ~18 segments' worth
  EXPECT_GT(stats(**s).evicted_segments, 0u);
  for (size_t d = 0; d < 2; ++d) {
    auto ids = list_segments(rank_dir(d));
    ASSERT_OK(ids);
    uint64_t bytes = 0;
    for (uint32_t id : *ids)
      bytes += fs::file_size(fmt::format("{}/{}", rank_dir(d), segment_name(id)));
    EXPECT_LE(bytes, 80 * kMiB) << "drive " << d;
    EXPECT_GE(ids->size(), 3u) << "drive " << d << " left unused";
  }
  // The most recent save survives eviction whole.
  for (uint64_t key = 39000; key < 39030; ++key) EXPECT_TRUE((*s)->find({key, ~key}).has_value());
}

TEST_F(DrivesTest, FullFileSystemSendsNewSegmentsToTheOtherDrives) {
  fs::create_directories(root(1));
  // A drive whose file system holds two segments, far less than the capacity says.
  if (::mount("tmpfs", root(1).c_str(), "tmpfs", 0, "size=40m") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno)
                 << "); needs CAP_SYS_ADMIN";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{root(1)};
  auto s = open({0, 1}, 512 * kMiB);
  ASSERT_OK(s);
  for (uint64_t save = 0; save < 8; ++save) store(**s, save * 1000, 60);
  EXPECT_EQ(segment_files(rank_dir(1)), 2u);
  EXPECT_GE(segment_files(rank_dir(0)), 5u);
  EXPECT_NE(stats(**s).drive_problem.find("full"), std::string::npos) << stats(**s).drive_problem;
  EXPECT_EQ(stats(**s).evicted_segments, 0u);
  for (uint64_t save = 0; save < 8; ++save) {
    for (uint64_t key = save * 1000; key < save * 1000 + 60; ++key)
      EXPECT_TRUE((*s)->find({key, ~key}).has_value());
  }
}

TEST_F(DrivesTest, RefusesListsThatAreNotOneStore) {
  { ASSERT_OK(open({0, 1})); }
  { ASSERT_OK(open({2})); }
  auto two_homes = open({0, 2});
  ASSERT_FALSE(two_homes.has_value());
  EXPECT_EQ(two_homes.error().code(), ErrorCode::kInvalidArgument) << two_homes.error().to_string();
  auto no_home = open({1});
  ASSERT_FALSE(no_home.has_value());
  auto no_home_two = open({1, 3});
  ASSERT_FALSE(no_home_two.has_value());
  EXPECT_EQ(no_home_two.error().code(), ErrorCode::kInvalidArgument)
      << no_home_two.error().to_string();
  EXPECT_NE(no_home_two.error().message().find("not among"), std::string::npos);
  { ASSERT_OK(open({3, 4})); }
  auto foreign = open({0, 4});  // drive 4 is store 3's
  ASSERT_FALSE(foreign.has_value());
  EXPECT_EQ(foreign.error().code(), ErrorCode::kInvalidArgument) << foreign.error().to_string();
  EXPECT_NE(foreign.error().message().find("another store"), std::string::npos);
}

TEST_F(DrivesTest, IndexRebuildWithADriveMissingIsRefused) {
  {
    auto s = open({0, 1});
    ASSERT_OK(s);
    store(**s, 1, 100);
  }
  const size_t segments = segment_files(rank_dir(0)) + segment_files(rank_dir(1));
  fs::remove(rank_dir(0) + "/index.ckpt");
  fs::rename(rank_dir(1), dir_.path() / "away");
  auto refused = open({0, 1});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kNotFound) << refused.error().to_string();
  fs::rename(dir_.path() / "away", rank_dir(1));
  // Nothing was touched: the segments of both drives are all still there.
  EXPECT_GT(segment_files(rank_dir(0)), 0u);
  EXPECT_GT(segment_files(rank_dir(1)), 0u);
  EXPECT_EQ(segment_files(rank_dir(0)) + segment_files(rank_dir(1)), segments);
}

// One directory given twice, however it is spelled, would be two drives of one store in one place:
// two markers in one directory and its capacity counted twice. Refused before anything is written,
// for a new store as for an existing one.
TEST_F(DrivesTest, SameDirectoryListedTwiceIsRefusedBeforeAnythingIsWritten) {
  fs::create_directories(root(0));
  fs::create_symlink(root(0), root(7));
  const std::string spellings[] = {
      root(0), root(0) + "/", root(0) + "/.", root(7),
      (dir_.path() / "x" / ".." / fmt::format("{}drive0", prefix_)).string()};
  fs::create_directories(dir_.path() / "x");
  for (bool existing : {false, true}) {
    for (const std::string& twice : spellings) {
      Options o = options({0});
      o.extra_roots = {root(1), twice};
      auto refused = Store::open(testing::store_config(o), log_);
      ASSERT_FALSE(refused.has_value()) << twice << (existing ? " (existing store)" : "");
      EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument) << refused.error().to_string();
      EXPECT_NE(refused.error().message().find("twice"), std::string::npos)
          << refused.error().to_string();
      if (!existing) {
        EXPECT_FALSE(fs::exists(rank_dir(0))) << "written before refusing " << twice;
        EXPECT_FALSE(fs::exists(rank_dir(1))) << "written before refusing " << twice;
      }
    }
    if (!existing) {
      ASSERT_OK(open({0, 1}));
    }
  }
}

}  // namespace
}  // namespace kvtier
