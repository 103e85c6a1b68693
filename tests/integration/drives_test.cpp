// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// An engine whose store spans several directories (one per drive): seeded sessions restore
// byte-exact across 2-4 drives and in any listing order; a drive gone at open or failing its reads
// costs only its own records (misses, counted, nothing dropped) and its records come back with it;
// a restore reads each drive through its own pipeline, bounded by its share of the staging.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include <fmt/format.h>

#include "fault_engine.hpp"
#include "read_only_dir.hpp"
#include "store/segment.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

/// Which store directory an open fd is in ("" when none of `dirs`).
std::string dir_of_fd(int fd, const std::vector<std::string>& dirs) {
  std::error_code ec;
  const std::string path = fs::read_symlink(fmt::format("/proc/self/fd/{}", fd), ec).string();
  for (const std::string& d : dirs) {
    if (path.starts_with(d + "/")) return d;
  }
  return {};
}

class DrivesEngineTest : public ::testing::Test {
 protected:
  std::string root(size_t i) const {
    return (dir_.path() / fmt::format("{}drive{}", prefix_, i)).string();
  }
  std::string rank_dir(size_t i) const { return root(i) + "/rank0of1"; }
  Options options(const std::vector<size_t>& drives) const {
    Options o = testing::small_options(root(drives[0]), g_);
    for (size_t i = 1; i < drives.size(); ++i) o.extra_roots.push_back(root(drives[i]));
    o.segment_bytes = 8 << 20;
    return o;
  }
  std::unique_ptr<Engine> open(const std::vector<size_t>& drives) {
    auto e = Engine::open(options(drives));
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  void save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    ASSERT_OK(e.save(tokens, kv.view));
  }
  /// Restores and checks every restored byte; returns how many tokens came back.
  uint64_t restored_exact(Engine& e, std::span<const Token> tokens, RestoreResult* out = nullptr) {
    return testing::restored_exact(e, g_, tokens, out);
  }
  /// Seeded sessions, 1 to `max_tokens` tokens (partial chunks, records spanning segments and
  /// drives).
  std::vector<std::vector<Token>> sessions(size_t count, uint64_t seed,
                                           uint64_t max_tokens = 16000) const {
    std::mt19937_64 rng(seed);
    std::vector<std::vector<Token>> out;
    for (size_t i = 0; i < count; ++i)
      out.push_back(synthetic::tokens(rng(), 1 + rng() % max_tokens));
    return out;
  }

  testing::TempDir dir_;
  std::string prefix_;
  KvGeometry g_ = testing::tiny_geometry();
};

TEST_F(DrivesEngineTest, SessionsRestoreByteExactAcrossTwoToFourDrivesInAnyOrder) {
  const uint64_t seed = testing::test_seed();
  for (size_t drives : {2, 3, 4}) {
    prefix_ = fmt::format("of{}-", drives);  // each drive count gets fresh directories
    std::mt19937_64 rng(seed + drives);
    g_ = testing::tiny_geometry(std::array<uint32_t, 4>{16, 64, 256, 1024}[rng() % 4]);
    std::vector<size_t> list(drives);
    for (size_t i = 0; i < drives; ++i) list[i] = i;
    const auto all = sessions(12, rng());
    {
      auto e = open(list);
      ASSERT_NE(e, nullptr);
      for (const auto& s : all) save(*e, s);
      for (const auto& s : all)
        EXPECT_EQ(restored_exact(*e, s), s.size()) << drives << " drives, " << g_.describe();
    }
    for (size_t i = 0; i < drives; ++i) {
      EXPECT_FALSE(list_segments(rank_dir(i))->empty())
          << "drive " << i << " of " << drives << " holds nothing";
    }
    std::shuffle(list.begin(), list.end(), rng);
    auto e = open(list);
    ASSERT_NE(e, nullptr);
    for (const auto& s : all)
      EXPECT_EQ(restored_exact(*e, s), s.size()) << drives << " drives reordered";
    EXPECT_EQ(e->stats().drives, drives);
    EXPECT_EQ(e->stats().restore_misses, 0u);
  }
}

TEST_F(DrivesEngineTest, DriveGoneAtOpenCostsOnlyItsRecordsAndTheyComeBackWithIt) {
  // Up to 4 MB each in 8 MiB segments: many sessions lie wholly on one drive.
  const auto all = sessions(24, testing::test_seed(), 4000);
  {
    auto e = open({0, 1, 2});
    ASSERT_NE(e, nullptr);
    for (const auto& s : all) save(*e, s);
  }
  // Removed (its directory moved away), then unreadable (a file where its directory was).
  for (bool unreadable : {false, true}) {
    fs::rename(rank_dir(1), dir_.path() / "away");
    if (unreadable) {
      fs::create_directories(dir_.path() / "drive1-file");
      fs::remove(root(1));
      std::ofstream(root(1)) << "not a directory";
    }
    uint64_t served = 0, total = 0, whole = 0;
    {
      auto e = open({0, 1, 2});
      ASSERT_NE(e, nullptr);
      const uint64_t records = e->stats().records;
      for (const auto& s : all) {
        const uint64_t n = restored_exact(*e, s);
        served += n;
        total += s.size();
        whole += n == s.size() ? 1 : 0;
      }
      const Stats st = e->stats();
      EXPECT_EQ(st.drives_offline, 1u);
      EXPECT_GT(st.offline_records, 0u);
      EXPECT_GT(st.drive_misses, 0u);
      EXPECT_FALSE(st.drive_problem.empty());
      EXPECT_EQ(st.checksum_misses, 0u);
      EXPECT_EQ(st.records, records) << "nothing dropped";
    }
    EXPECT_LT(served, total) << "the missing drive's records were served";
    EXPECT_GT(whole, 0u) << "no session was served whole from the other drives";
    if (unreadable) fs::remove(root(1)), fs::create_directories(root(1));
    fs::rename(dir_.path() / "away", rank_dir(1));
    auto e = open({2, 1, 0});
    ASSERT_NE(e, nullptr);
    for (const auto& s : all) EXPECT_EQ(restored_exact(*e, s), s.size());
    EXPECT_EQ(e->stats().drives_offline, 0u);
  }
}

TEST_F(DrivesEngineTest, DriveFailingItsReadsCostsOnlyItsRecords) {
  const auto all = sessions(24, testing::test_seed() + 1, 4000);
  auto e = open({0, 1});
  ASSERT_NE(e, nullptr);
  for (const auto& s : all) save(*e, s);
  const uint64_t records = e->stats().records;
  const std::vector<std::string> failing{rank_dir(1)};
  uint64_t served = 0, total = 0, whole = 0;
  {
    testing::FaultScope eio([&](const IoRequest& r, uint64_t) {
      return dir_of_fd(r.fd, failing).empty() ? testing::Fault{} : testing::Fault{true, 0, -EIO};
    });
    for (const auto& s : all) {
      RestoreResult r;
      const uint64_t n = restored_exact(*e, s, &r);
      served += n;
      total += s.size();
      whole += n == s.size() ? 1 : 0;
      if (n < s.size()) {
        EXPECT_FALSE(r.problem.empty());
      }
    }
  }
  EXPECT_LT(served, total);
  EXPECT_GT(whole, 0u);
  EXPECT_EQ(e->stats().records, records) << "a read error is no evidence against a record";
  for (const auto& s : all)
    EXPECT_EQ(restored_exact(*e, s), s.size()) << "served again once the drive reads";
}

/// Wraps every I/O engine the library makes: which drives each one read, its depth, and the most
/// requests it had in flight.
class DriveProbe {
 public:
  struct Seen {
    std::set<std::string> drives;
    uint32_t depth = 0;
    size_t max_in_flight = 0;
  };
  explicit DriveProbe(std::vector<std::string> dirs) : dirs_(std::move(dirs)) {
    set_io_engine_wrapper_for_testing(
        [this](std::unique_ptr<IoEngine> inner) -> std::unique_ptr<IoEngine> {
          std::lock_guard lock(mu_);
          seen_.push_back(std::make_unique<Seen>());
          return std::make_unique<Wrapped>(std::move(inner), *this, *seen_.back());
        });
  }
  ~DriveProbe() { set_io_engine_wrapper_for_testing({}); }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    std::vector<Seen> out;
    for (const auto& s : seen_) {
      if (!s->drives.empty()) out.push_back(*s);
    }
    return out;
  }

 private:
  class Wrapped final : public IoEngine {
   public:
    Wrapped(std::unique_ptr<IoEngine> inner, DriveProbe& probe, Seen& seen)
        : inner_(std::move(inner)), probe_(probe), seen_(seen) {
      seen_.depth = inner_->depth();
    }
    std::string_view name() const override { return inner_->name(); }
    uint32_t depth() const override { return inner_->depth(); }
    size_t most_held() const override { return inner_->most_held(); }
    Status enqueue(const IoRequest& r) override {
      seen_.drives.insert(dir_of_fd(r.fd, probe_.dirs_));
      seen_.max_in_flight = std::max(seen_.max_in_flight, ++in_flight_);
      return inner_->enqueue(r);
    }
    Status submit() override { return inner_->submit(); }
    void wake() override { inner_->wake(); }
    Result<size_t> wait(std::span<IoCompletion> out) override {
      auto n = inner_->wait(out);
      if (n) in_flight_ -= *n;
      return n;
    }

   private:
    std::unique_ptr<IoEngine> inner_;
    DriveProbe& probe_;
    Seen& seen_;
    size_t in_flight_ = 0;
  };

  std::vector<std::string> dirs_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Seen>> seen_;
};

TEST_F(DrivesEngineTest, RestoreReadsEachDriveThroughItsOwnShareOfStaging) {
  // Staging of 4 slots of 1 MiB over 2 drives: 2 slots (2 MiB in flight) per drive.
  auto e = open({0, 1});
  ASSERT_NE(e, nullptr);
  const auto all = sessions(10, testing::test_seed() + 2);
  for (const auto& s : all) save(*e, s);
  std::set<std::string> both;
  for (const auto& s : all) {
    DriveProbe probe({rank_dir(0), rank_dir(1)});
    EXPECT_EQ(restored_exact(*e, s), s.size());
    std::set<std::string> drives;
    const auto seen = probe.seen();
    uint32_t slots = 0;
    for (const DriveProbe::Seen& engine : seen) {
      if (seen.size() > 1) {
        EXPECT_EQ(engine.drives.size(), 1u)
            << "a pipeline of a read over several drives read more than one";
        // A read of fewer pieces than slots leases fewer; never more than its half of the 4.
        EXPECT_LE(engine.depth, 2u) << "4 MiB of staging in 1 MiB slots, shared by 2 drives";
        EXPECT_LE(engine.max_in_flight, engine.depth);
      }
      slots += engine.depth;
      drives.insert(engine.drives.begin(), engine.drives.end());
    }
    EXPECT_LE(slots, 4u) << "the drives' pipelines together within the staging";
    if (drives.size() > 1) {
      EXPECT_EQ(seen.size(), drives.size()) << "one pipeline per drive";
      both.insert(drives.begin(), drives.end());
    }
  }
  EXPECT_EQ(both.size(), 2u) << "no session was read from both drives";
}

size_t segment_count(const std::string& dir) {
  auto ids = list_segments(dir);
  return ids ? ids->size() : 0;
}

// A drive that goes away under an open engine (its directory moved: the open files stay
// readable): a new segment cannot be made there, so the drive takes no more and the saves go on
// to the others; every session restores byte-exact then, and after a reopen with the drive back.
TEST_F(DrivesEngineTest, DriveRemovedWhileOpenTakesNoNewSegmentsAndSavesGoOn) {
  const auto before = sessions(8, testing::test_seed() + 3, 4000);
  const auto after = sessions(30, testing::test_seed() + 4, 4000);
  const fs::path away = dir_.path() / "away";
  {
    auto e = open({0, 1, 2});
    ASSERT_NE(e, nullptr);
    for (const auto& s : before) save(*e, s);
    fs::rename(rank_dir(1), away);
    const size_t on_removed = segment_count(away.string());
    for (const auto& s : after) {
      save(*e, s);
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(segment_count(away.string()), on_removed)
        << "a segment was made on the removed drive";
    EXPECT_FALSE(fs::exists(rank_dir(1)));
    const Stats st = e->stats();
    EXPECT_EQ(st.drives_out_of_placement, 1u);
    EXPECT_NE(st.drive_problem.find(rank_dir(1)), std::string::npos) << st.drive_problem;
    for (const auto* all : {&before, &after}) {
      for (const auto& s : *all) EXPECT_EQ(restored_exact(*e, s), s.size());
    }
  }
  fs::rename(away, rank_dir(1));
  auto e = open({0, 1, 2});
  ASSERT_NE(e, nullptr);
  for (const auto* all : {&before, &after}) {
    for (const auto& s : *all) EXPECT_EQ(restored_exact(*e, s), s.size()) << "after reopen";
  }
  EXPECT_EQ(e->stats().drives_out_of_placement, 0u);
}

// A drive deleted under an open engine (its files unlinked while open): a save whose records went
// into one of its files is not acknowledged, and the saves after it go to the other drive.
TEST_F(DrivesEngineTest, DriveDeletedWhileOpenNeverHoldsAnAcknowledgedSave) {
  const auto before = sessions(6, testing::test_seed() + 5, 4000);
  const auto after = sessions(20, testing::test_seed() + 6, 4000);
  std::vector<const std::vector<Token>*> acked;
  size_t failed = 0;
  {
    auto e = open({0, 1});
    ASSERT_NE(e, nullptr);
    for (const auto& s : before) save(*e, s);
    fs::remove_all(rank_dir(1));
    for (const auto& s : after) {
      HostKv kv(g_, s.size());
      synthetic::fill_kv(g_, s, kv.span(), s.size());
      if (e->save(s, kv.view)) {
        acked.push_back(&s);
      } else {
        ++failed;
      }
    }
  }
  EXPECT_LE(failed, 1u) << "saves kept failing after the drive was gone";
  auto e = open({0, 1});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->stats().drives_offline, 1u);
  for (const auto* s : acked)
    EXPECT_EQ(restored_exact(*e, *s), s->size()) << "an acknowledged save was lost";
}

// A drive remounted read-only, found so at open: its records are served, every other drive works
// as before, new segments go to the writable drives, and verify reads it all.
TEST_F(DrivesEngineTest, ReadOnlyDriveIsServedAndSavesGoToTheOthers) {
  const auto before = sessions(24, testing::test_seed() + 7, 4000);
  const auto after = sessions(24, testing::test_seed() + 8, 4000);
  {
    auto e = open({0, 1, 2});
    ASSERT_NE(e, nullptr);
    for (const auto& s : before) save(*e, s);
  }
  const size_t on_read_only = segment_count(rank_dir(1));
  ASSERT_GT(on_read_only, 0u);
  {
    testing::ReadOnlyDir read_only(rank_dir(1));
    if (!read_only.ok())
      GTEST_SKIP() << "cannot make a directory read-only here: " << read_only.why();
    auto opened = Engine::open(options({0, 1, 2}));
    ASSERT_OK(opened);
    Engine& e = **opened;
    // Not mistaken for a file system without O_DIRECT.
    EXPECT_EQ(e.stats().io_fallback.find(rank_dir(1)), std::string::npos) << e.stats().io_fallback;
    for (const auto& s : before) EXPECT_EQ(restored_exact(e, s), s.size());
    for (const auto& s : after) {
      save(e, s);
      if (HasFatalFailure()) return;
    }
    for (const auto& s : after) EXPECT_EQ(restored_exact(e, s), s.size());
    EXPECT_EQ(segment_count(rank_dir(1)), on_read_only);
    auto report = e.verify({});
    ASSERT_OK(report);
    EXPECT_EQ(report->corrupt_records, 0u);
    EXPECT_EQ(report->records_checked, e.stats().records);
    const Stats st = e.stats();
    EXPECT_EQ(st.drives_out_of_placement, 1u);
    EXPECT_EQ(st.drives_offline, 0u);
    EXPECT_NE(st.drive_problem.find(rank_dir(1)), std::string::npos) << st.drive_problem;
  }
  auto e = open({2, 0, 1});
  ASSERT_NE(e, nullptr);
  for (const auto* all : {&before, &after}) {
    for (const auto& s : *all) EXPECT_EQ(restored_exact(*e, s), s.size()) << "writable again";
  }
}

// The same drive turning read-only while the engine is open: no new segment can be made there.
TEST_F(DrivesEngineTest, DriveTurningReadOnlyWhileOpenTakesNoNewSegments) {
  const auto before = sessions(8, testing::test_seed() + 9, 4000);
  const auto after = sessions(30, testing::test_seed() + 10, 4000);
  auto e = open({0, 1, 2});
  ASSERT_NE(e, nullptr);
  for (const auto& s : before) save(*e, s);
  testing::ReadOnlyDir read_only(rank_dir(1));
  if (!read_only.ok())
    GTEST_SKIP() << "cannot make a directory read-only here: " << read_only.why();
  const size_t on_read_only = segment_count(rank_dir(1));
  for (const auto& s : after) {
    save(*e, s);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(segment_count(rank_dir(1)), on_read_only);
  EXPECT_EQ(e->stats().drives_out_of_placement, 1u);
  for (const auto* all : {&before, &after}) {
    for (const auto& s : *all) EXPECT_EQ(restored_exact(*e, s), s.size());
  }
}

}  // namespace
}  // namespace kvtier
