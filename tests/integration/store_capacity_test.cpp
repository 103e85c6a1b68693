// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Capacity and eviction as a user sees them across engine lifetimes: what a refused save leaves
// behind, which sessions eviction takes after reopens, and what the store's files weigh on disk.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "host_session_test.hpp"
#include "store/index_log.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

class StoreCapacityTest : public testing::HostSessionTest {
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
};

// The user's report: tiny, 64 MiB, sessions of 3,000 and 20,000 tokens, then one of 70,000 that
// cannot fit. Refusing it must not cost the two that were there.
TEST_F(StoreCapacityTest, RefusedOversizedSaveEvictsNothing) {
  const auto a = synthetic::tokens(7, 3000);
  const auto b = synthetic::tokens(1, 20000);
  const auto big = synthetic::tokens(2, 70000);
  {
    auto e = open(options());
    ASSERT_OK(save(*e, a));
  }
  {
    auto e = open(options());
    ASSERT_OK(save(*e, b));
  }
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

// 63 chunks of 256 tokens fill one 16 MiB segment exactly (63 records of 4 KiB + 256 KiB), so each
// of these sessions is one segment and a restore makes exactly that segment recently used.
constexpr uint64_t kSegmentSession = 63 * 256;

/// Room for four such sessions (and the store's index files) under one capacity.
Options four_segments(Options o) {
  o.capacity_bytes = (uint64_t{64} << 20) + (uint64_t{1} << 20);
  return o;
}

// The CLI opens one engine per command. A session restored after later saves must outlive them.
TEST_F(StoreCapacityTest, RestoredSessionOutlivesLaterSavesAcrossReopens) {
  const Options o = four_segments(options());
  std::vector<std::vector<Token>> s;
  for (uint64_t seed = 0; seed < 5; ++seed)
    s.push_back(synthetic::tokens(600 + seed, kSegmentSession));
  for (int i = 0; i < 4; ++i) {
    auto e = open(o);
    ASSERT_OK(save(*e, s[i]));
  }
  {
    auto e = open(o);
    ASSERT_EQ(restored(*e, s[0]), s[0].size());
  }
  {
    auto e = open(o);
    ASSERT_OK(save(*e, s[4]));
    EXPECT_EQ(e->stats().evicted_segments, 1u);
  }
  auto e = open(o);
  EXPECT_EQ(restored(*e, s[0]), s[0].size()) << "the restored session was evicted as if never used";
  EXPECT_EQ(*e->lookup(s[1]), 0u) << "the least recently used session should have gone";
  EXPECT_EQ(restored(*e, s[2]), s[2].size());
  EXPECT_EQ(restored(*e, s[4]), s[4].size());
}

// The use of s0 is folded into a checkpoint (written at open because a lost segment's records were
// dropped), which empties the journal that recorded it: the checkpoint must carry it.
TEST_F(StoreCapacityTest, RecencySurvivesTheCheckpointThatReplacesTheJournal) {
  const Options o = four_segments(options());
  std::vector<std::vector<Token>> s;
  for (uint64_t seed = 0; seed < 5; ++seed)
    s.push_back(synthetic::tokens(700 + seed, kSegmentSession));
  const auto lost = synthetic::tokens(799, 3 * 256);
  for (int i = 0; i < 3; ++i) {
    auto e = open(o);
    ASSERT_OK(save(*e, s[i]));
  }
  {
    auto e = open(o);
    ASSERT_OK(save(*e, lost));
  }  // alone in the fourth segment
  {
    auto e = open(o);
    ASSERT_EQ(restored(*e, s[0]), s[0].size());
  }
  std::vector<fs::path> segments;
  for (const auto& entry : fs::directory_iterator(dir_.path() / "rank0of1")) {
    if (entry.path().extension() == ".kvt") segments.push_back(entry.path());
  }
  std::sort(segments.begin(), segments.end());
  ASSERT_EQ(segments.size(), 4u);
  fs::remove(segments.back());
  {
    auto e = open(o);
    EXPECT_GT(e->stats().dropped_at_open, 0u);
    // Compacted: what is left names only the highest id, whose segment (the fourth) is gone.
    EXPECT_EQ(fs::file_size(dir_.path() / "rank0of1" / "index.journal"),
              journal_entry_bytes(JournalOp::kUse))
        << "no checkpoint was taken";
  }
  {
    auto e = open(o);
    ASSERT_OK(save(*e, s[3]));
  }
  {
    auto e = open(o);
    ASSERT_OK(save(*e, s[4]));
    EXPECT_EQ(e->stats().evicted_segments, 1u);
  }
  auto e = open(o);
  EXPECT_EQ(restored(*e, s[0]), s[0].size()) << "the use recorded before the checkpoint was lost";
  EXPECT_EQ(*e->lookup(s[1]), 0u);
}

// Many operations, one engine each, checked against a model of least-recently-used order: every
// save of a new segment-sized session evicts exactly the session the model says. Long enough for
// the journal to be folded into checkpoints along the way, so recency must survive those too.
TEST_F(StoreCapacityTest, EvictionFollowsUseOrderAcrossReopensAndCheckpoints) {
  const Options o = four_segments(options());
  std::mt19937_64 rng(testing::test_seed());
  std::vector<uint64_t> resident;  // seeds, least recently used first
  uint64_t next_seed = 1000;
  const fs::path checkpoint = dir_.path() / "rank0of1" / "index.ckpt";
  std::set<ino_t> checkpoints;  // each one is a new file renamed into place
  for (int op = 0; op < 60; ++op) {
    struct stat st {};
    if (::stat(checkpoint.c_str(), &st) == 0) checkpoints.insert(st.st_ino);
    auto e = open(o);
    if (resident.size() < 4 || rng() % 2 == 0) {
      const uint64_t seed = next_seed++;
      ASSERT_OK(save(*e, synthetic::tokens(seed, kSegmentSession)));
      if (resident.size() == 4) resident.erase(resident.begin());
      resident.push_back(seed);
    } else {
      const size_t pick = rng() % resident.size();
      const uint64_t seed = resident[pick];
      ASSERT_EQ(restored(*e, synthetic::tokens(seed, kSegmentSession)), kSegmentSession)
          << "op " << op << ": session " << seed << " should still be stored";
      resident.erase(resident.begin() + static_cast<std::ptrdiff_t>(pick));
      resident.push_back(seed);
    }
  }
  // The first open's checkpoint, then at least one compaction (20+ saves of 63 journal entries).
  EXPECT_GE(checkpoints.size(), 2u)
      << "the journal was never compacted: the test checks less than it says";
  auto e = open(o);
  EXPECT_EQ(e->stats().records, resident.size() * 63);
  for (uint64_t seed : resident) {
    EXPECT_EQ(*e->lookup(synthetic::tokens(seed, kSegmentSession)), kSegmentSession) << seed;
  }
}

/// What `du` counts: st_blocks of `path` and of everything under it. Entries that vanish while it
/// walks (the store deletes files as it works) count as nothing.
uint64_t disk_usage(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  uint64_t total = static_cast<uint64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode)) return total;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return total;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") total += disk_usage(path + "/" + name);
  }
  ::closedir(d);
  return total;
}

// Everything kvtier writes under the store counts against its capacity: segments, journal,
// checkpoint (and its replacement while it is written), manifest, lock, the directories. Saves,
// restores, evictions and reopens run while a thread samples the usage, so the moments inside an
// operation are checked too. Returns the most segments the store held at once.
uint64_t check_disk_usage_stays_within(const Options& o, const KvGeometry& g) {
  const std::string root = o.root;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{0};
  std::thread sampler([&] {
    while (!done) {
      const uint64_t now = disk_usage(root);
      if (now > peak) peak = now;
    }
  });
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::vector<Token>> saved;
  uint64_t over = 0, evicted = 0, most_segments = 0;
  std::set<ino_t> checkpoints;  // each one is a new file renamed into place
  for (int op = 0; op < 40 && over < 3; ++op) {
    struct stat st {};
    if (::stat((root + "/rank0of1/index.ckpt").c_str(), &st) == 0) checkpoints.insert(st.st_ino);
    auto e = Engine::open(o);
    if (!e) {
      ADD_FAILURE() << e.error().to_string();
      break;
    }
    saved.push_back(synthetic::tokens(5000 + op, 500 + rng() % 20000));
    HostKv kv(g, saved.back().size());
    synthetic::fill_kv(g, saved.back(), kv.span(), saved.back().size());
    EXPECT_OK((*e)->save(saved.back(), kv.view));
    most_segments = std::max(most_segments, (*e)->stats().segments);
    HostKv out(g, 20500);
    EXPECT_OK((*e)->restore(saved[rng() % saved.size()], out.view));
    if (rng() % 4 == 0) {
      EXPECT_OK((*e)->evict(saved[rng() % saved.size()]));
    }
    evicted += (*e)->stats().evicted_segments;
    e->reset();
    if (const uint64_t du = disk_usage(root); du > o.capacity_bytes) {
      ++over;
      ADD_FAILURE() << "op " << op << ": " << du << " bytes on disk, capacity " << o.capacity_bytes;
    }
  }
  done = true;
  sampler.join();
  EXPECT_LE(peak.load(), o.capacity_bytes) << "at some moment inside an operation";
  EXPECT_GT(evicted, 10u);
  EXPECT_GE(checkpoints.size(), 2u) << "the journal was never compacted";
  return most_segments;
}

// The user's report: 64 MiB of capacity, 16 MiB segments, du 67,194,880 bytes.
TEST_F(StoreCapacityTest, StoreOnDiskNeverExceedsItsCapacity) {
  check_disk_usage_stays_within(options(), g_);
}

// Three segments and little more than the index share (about 120 KiB here): the store runs full
// with its index files at the edge of the capacity, where a file the accounting forgot shows.
TEST_F(StoreCapacityTest, StoreOnDiskNeverExceedsATightCapacity) {
  Options o = options();
  o.capacity_bytes = 3 * (uint64_t{16} << 20) + (uint64_t{132} << 10);
  EXPECT_EQ(check_disk_usage_stays_within(o, g_), 3u)
      << "the capacity is not as tight as the test means";
}

}  // namespace
}  // namespace kvtier
