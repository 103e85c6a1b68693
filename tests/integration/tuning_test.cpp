// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Fast by default: an engine probes each drive of its store on the drive's own segment files and
// reads with what it found. Against two emulated drives (modelled_drive.hpp) the choice differs;
// the tuning is kept with the drive across reopens, a drive added later is probed on its own, a
// failed probe or an unreadable tuning leaves safe defaults and says why, and explicit settings
// win. Every restore is checked byte for byte.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "engine/tuning.hpp"
#include "modelled_drive.hpp"
#include "store/drive_tuning.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::DriveModel;
using testing::ModelScope;
using testing::punishes_depth;
using testing::rewards_depth;

constexpr uint64_t kMiB = uint64_t{1} << 20;

class TuningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A probe measures the drive, never the page cache: where O_DIRECT is refused (tmpfs before
    // Linux 6.6) there is nothing to tune, and the engine says so instead.
    const std::string probe = (dir_.path() / "direct").string();
    const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
    if (fd < 0)
      GTEST_SKIP() << "O_DIRECT refused in " << dir_.path() << ": " << std::strerror(errno);
    ::close(fd);
    config_.min_written_bytes = 4 * kMiB;
    config_.min_written_bytes_on_request = kMiB;
    config_.probe.request_sizes = {64u << 10, 256u << 10, 1u << 20};
    config_.probe.in_flight = {1, 2, 4, 8};
    config_.probe.max_staging_bytes = 8 * kMiB;
    config_.probe.bytes_per_trial = 4 * kMiB;
    set_tuning_config_for_testing(config_);
  }
  void TearDown() override { set_tuning_config_for_testing(std::nullopt); }
  TuningConfig config_;

  std::string root(size_t i) const { return (dir_.path() / fmt::format("drive{}", i)).string(); }
  std::string tuning_file(size_t i) const { return root(i) + "/" + kTuningName; }

  /// Tuning on: no request size or staging given.
  Options options(std::vector<size_t> drives = {0}) {
    Options o = testing::small_options(root(drives[0]), g_);
    for (size_t i = 1; i < drives.size(); ++i) o.extra_roots.push_back(root(drives[i]));
    o.io_request_bytes = 0;
    o.staging_bytes = 0;
    o.log_level = LogLevel::kWarn;
    o.log_sink = [this](LogLevel, std::string_view line) {
      std::lock_guard lock(log_mu_);
      log_ += std::string(line) + "\n";
    };
    return o;
  }

  /// Saves `sessions` seeded sessions of `tokens` tokens (8 MiB of KV each by default) through an
  /// engine opened with `o`, and returns the tokens.
  std::vector<std::vector<Token>> fill(const Options& o, size_t sessions = 1,
                                       size_t tokens = 8192) {
    auto e = Engine::open(o);
    EXPECT_TRUE(e.has_value()) << e.error().to_string();
    std::vector<std::vector<Token>> out;
    for (size_t s = 0; s < sessions; ++s) {
      out.push_back(synthetic::tokens(next_seed_++, tokens));
      EXPECT_TRUE(testing::is_ok(testing::save_synthetic(**e, o.geometry, out.back())));
    }
    return out;
  }

  /// Reopens `o` with every read of the drive failing: a probe at this open would fail and say
  /// so, a kept tuning reads nothing and is `first` (source, sizes) again.
  void expect_kept_through_failing_reads(const Options& o, const IoSettings& first) {
    DriveModel failing = rewards_depth();
    failing.fail_at = 0;
    ModelScope scope(failing);
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    const IoSettings again = (*e)->io_settings();
    SCOPED_TRACE(describe(again));
    EXPECT_EQ(again.source, first.source);
    ASSERT_EQ(again.drives.size(), 1u);
    EXPECT_EQ(again.drives[0].state, "kept");
    EXPECT_EQ(again.request_bytes, first.request_bytes);
    EXPECT_EQ(again.staging_bytes, first.staging_bytes);
  }

  /// The settings an engine opened with `o` reads with, its drives emulated by `model`.
  IoSettings settings_at_open(const Options& o, const DriveModel& model) {
    ModelScope scope(model);
    auto e = Engine::open(o);
    EXPECT_TRUE(e.has_value()) << e.error().to_string();
    return e ? (*e)->io_settings() : IoSettings{};
  }

  /// The settings of the open of `o` that probes its one drive, one that rewards depth, for the
  /// first time; `whole`: the tuning's staging.
  IoSettings first_probe_of(const Options& o, uint64_t& whole) {
    const IoSettings s = settings_at_open(o, rewards_depth());
    SCOPED_TRACE(describe(s));
    EXPECT_EQ(s.drives.size(), 1u);
    if (s.drives.size() != 1) return s;
    EXPECT_EQ(s.drives[0].state, "probed");
    // Four in flight or more, so that two stores split it without the floor.
    EXPECT_GE(s.drives[0].in_flight, 4u) << "a drive that rewards depth";
    EXPECT_EQ(s.request_bytes, s.drives[0].request_bytes);
    whole = s.request_bytes * std::max<uint64_t>(s.drives[0].in_flight, 2);
    EXPECT_EQ(s.source.rfind("tuned", 0), 0u);
    return s;
  }

  static std::string describe(const IoSettings& s) {
    std::string out =
        fmt::format("{} x staging {} from {}:", s.request_bytes, s.staging_bytes, s.source);
    for (const DriveTuningInfo& d : s.drives) {
      out += fmt::format(" [{}: {} x {} ({})]", d.dir, d.request_bytes, d.in_flight, d.state);
    }
    return out;
  }

  KvGeometry g_ = testing::tiny_geometry();
  testing::TempDir dir_;
  uint64_t next_seed_ = testing::test_seed();
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(TuningTest, ProbesAtOpenAndPicksDifferentlyForDrivesThatRewardOrPunishDepth) {
  IoSettings got[2];
  for (size_t i = 0; i < 2; ++i) {
    const Options o = options({i});
    auto sessions = fill(o);  // a new store: nothing to probe while it is empty
    ModelScope scope(i == 0 ? rewards_depth() : punishes_depth());
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    got[i] = (*e)->io_settings();
    SCOPED_TRACE(describe(got[i]));
    ASSERT_EQ(got[i].source, "tuned");
    ASSERT_EQ(got[i].drives.size(), 1u);
    EXPECT_EQ(got[i].drives[0].state, "probed");
    EXPECT_TRUE(fs::exists(tuning_file(i)));
    // The engine reads with it: request size and staging are the drive's pattern.
    EXPECT_EQ(got[i].request_bytes, got[i].drives[0].request_bytes);
    EXPECT_EQ(got[i].staging_bytes,
              got[i].drives[0].request_bytes * std::max(got[i].drives[0].in_flight, 2u));
    EXPECT_EQ(testing::restored_exact(**e, g_, sessions[0]), sessions[0].size());
  }
  EXPECT_GE(got[0].drives[0].in_flight, 4u) << describe(got[0]);
  EXPECT_EQ(got[1].drives[0].in_flight, 1u) << describe(got[1]);
}

TEST_F(TuningTest, TheTuningOutlivesAReopenWithoutProbingAgain) {
  const Options o = options();
  auto sessions = fill(o);
  IoSettings first;
  {
    ModelScope scope(punishes_depth());
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    first = (*e)->io_settings();
  }
  ASSERT_EQ(first.source, "tuned") << describe(first);
  expect_kept_through_failing_reads(o, first);
  // A read-only open (kvtier stat) shows it too.
  Options ro = o;
  ro.read_only = true;
  auto e = Engine::open(ro);
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  EXPECT_EQ((*e)->io_settings().drives[0].state, "kept");
  EXPECT_EQ(testing::restored_exact(**e, g_, sessions[0]), sessions[0].size());
}

TEST_F(TuningTest, AFailedProbeLeavesTheDefaultsAndSaysWhy) {
  const Options o = options();
  auto sessions = fill(o);
  DriveModel failing = rewards_depth();
  failing.fail_at = 3;
  IoSettings s;
  {
    ModelScope scope(failing);
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    s = (*e)->io_settings();
  }
  SCOPED_TRACE(describe(s));
  EXPECT_EQ(s.source, "defaults");
  EXPECT_EQ(s.request_bytes, 16 * kMiB);
  EXPECT_EQ(s.staging_bytes, 128 * kMiB);
  EXPECT_TRUE(s.drives[0].state.starts_with("not tuned: probe failed")) << s.drives[0].state;
  EXPECT_NE(log_.find("probing"), std::string::npos) << log_;
  // The failure is kept with the drive, so that the next open does not read it again at once:
  // defaults, saying why, and every byte there.
  auto record = read_drive_tuning(*FileSystem::posix(), root(0));
  ASSERT_TRUE(record.has_value()) << record.error().to_string();
  ASSERT_TRUE(record->has_value());
  EXPECT_FALSE((*record)->failed.empty());
  EXPECT_EQ((*record)->request_bytes, 0u);
  {
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    const IoSettings again = (*e)->io_settings();
    EXPECT_EQ(again.source, "defaults") << describe(again);
    EXPECT_NE(again.drives[0].state.find("probed again at an open from 3600 s"), std::string::npos)
        << again.drives[0].state;
    EXPECT_EQ(testing::restored_exact(**e, g_, sessions[0]), sessions[0].size());
    // Asked for, a probe runs whenever: the drive is healthy again and gets its tuning.
    auto tuned = (*e)->tune();
    ASSERT_TRUE(tuned.has_value()) << tuned.error().to_string();
    EXPECT_EQ(tuned->drives[0].state, "probed");
  }
  // Once the retry time has passed an open probes it again (the time set to now here).
  ASSERT_TRUE(write_drive_tuning(*FileSystem::posix(), root(0), **record).ok());
  config_.retry_failed_after_seconds = 0;
  set_tuning_config_for_testing(config_);
  auto e = Engine::open(o);
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  EXPECT_EQ((*e)->io_settings().source, "tuned") << describe((*e)->io_settings());
  EXPECT_EQ(testing::restored_exact(**e, g_, sessions[0]), sessions[0].size());
}

TEST_F(TuningTest, AnUnreadableTuningIsProbedAgainNotUsed) {
  const Options o = options();
  fill(o);
  std::ofstream(tuning_file(0)) << R"({"format": "kvtier-drive-tuning", "request_bytes": 12345})";
  auto e = Engine::open(o);
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  const IoSettings s = (*e)->io_settings();
  EXPECT_EQ(s.drives[0].state, "probed") << describe(s);
  EXPECT_NE(log_.find("counts as not tuned"), std::string::npos) << log_;
  auto kept = read_drive_tuning(*FileSystem::posix(), root(0));
  ASSERT_TRUE(kept.has_value()) << kept.error().to_string();
  EXPECT_TRUE(kept->has_value());
}

// A tuning lies one level above the store's directory on the drive (the root of per-rank stores,
// the model's directory of a TP-free store): one that an older kvtier kept in the store's own
// directory is not read (the drive counts as untuned and is probed), and is left as it was.
TEST_F(TuningTest, ATuningInAStoresOwnDirectoryIsNotRead) {
  for (uint32_t format : {1u, 2u}) {
    SCOPED_TRACE(::testing::Message() << "store_format " << format);
    Options o = options({format - 1});  // a drive each
    o.store_format = format;
    fill(o, 2);
    fs::path above = root(format - 1);
    if (format == 2) {
      for (const auto& d : fs::directory_iterator(above / "kvtier2")) above = d.path();
    }
    const fs::path own = above / (format == 1 ? "rank0of1" : "g0of2");
    ASSERT_TRUE(fs::exists(own)) << own;
    // A pattern the probe here never tries (its sizes are 64 KiB to 1 MiB).
    const DriveTuning old{2u << 20, 3, 1e9, (own / "seg").string(), "2026-12-01T00:00:00Z"};
    ASSERT_TRUE(write_drive_tuning(*FileSystem::posix(), own.string(), old).ok());
    const IoSettings s = settings_at_open(o, punishes_depth());
    EXPECT_EQ(s.drives.at(0).state, "probed") << describe(s);
    EXPECT_NE(s.request_bytes, old.request_bytes) << describe(s);
    auto moved = read_drive_tuning(*FileSystem::posix(), above.string());
    ASSERT_TRUE(moved.has_value()) << moved.error().to_string();
    EXPECT_TRUE(moved->has_value()) << "the probe's tuning, above the store's directory";
    auto left = read_drive_tuning(*FileSystem::posix(), own.string());
    ASSERT_TRUE(left.has_value() && left->has_value());
    EXPECT_EQ((*left)->request_bytes, old.request_bytes);
  }
}

TEST_F(TuningTest, ExplicitSettingsWinAndTuningOffProbesNothing) {
  Options o = options();
  fill(o);
  o.io_request_bytes = 2 * kMiB;
  {
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    const IoSettings s = (*e)->io_settings();
    EXPECT_EQ(s.source, "options");
    EXPECT_EQ(s.request_bytes, 2 * kMiB);
    EXPECT_EQ(s.staging_bytes, 128 * kMiB);
  }
  o.io_request_bytes = 0;
  o.tune = false;
  {
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    EXPECT_EQ((*e)->io_settings().source, "defaults (tuning off)");
  }
  EXPECT_FALSE(fs::exists(tuning_file(0)));
}

TEST_F(TuningTest, ASmallStoreIsNotProbedUntilItHoldsEnough) {
  const Options o = options();
  fill(o, 1, 1024);  // 1 MiB: under the 4 MiB this test's config asks for
  auto e = Engine::open(o);
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  const IoSettings s = (*e)->io_settings();
  EXPECT_EQ(s.source, "defaults") << describe(s);
  EXPECT_TRUE(s.drives[0].state.starts_with("not tuned: holds no segment")) << s.drives[0].state;
  // On request it is (1 MiB is enough for tune()), and the next engine uses it.
  auto found = (*e)->tune();
  ASSERT_TRUE(found.has_value()) << found.error().to_string();
  EXPECT_EQ(found->drives[0].state, "probed") << describe(*found);
  e->reset();
  auto next = Engine::open(o);
  ASSERT_TRUE(next.has_value()) << next.error().to_string();
  EXPECT_EQ((*next)->io_settings().source, "tuned");
}

TEST_F(TuningTest, SegmentsSmallerThanTheProbesMinimumAreProbedOnceThreeQuartersWritten) {
  // A store over several drives picks segments that spread a session; they may be smaller than
  // the minimum a probe asks for, and a sealed segment is never written to its last byte.
  config_.min_written_bytes = 64 * kMiB;  // more than a 16 MiB segment can ever hold
  set_tuning_config_for_testing(config_);
  const Options o = options({0, 1});
  ASSERT_EQ(o.segment_bytes, 16 * kMiB);
  fill(o, 4);  // 32 MiB of KV: sealed segments of about 16 MiB on each drive
  auto e = Engine::open(o);
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  const IoSettings s = (*e)->io_settings();
  ASSERT_EQ(s.drives.size(), 2u) << describe(s);
  EXPECT_EQ(s.source, "tuned") << describe(s);
  for (const DriveTuningInfo& d : s.drives) EXPECT_EQ(d.state, "probed") << describe(s);
}

TEST_F(TuningTest, OneRankProbesADriveAtATime) {
  const Options o = options();
  fill(o);
  // Another rank probing the same drive holds its lock: this open waits for it, then probes.
  auto other = FileSystem::posix()->open(root(0) + "/.kvtier-probe.lock", O_RDWR | O_CREAT);
  ASSERT_TRUE(other.has_value()) << other.error().to_string();
  ASSERT_TRUE(testing::is_ok((*other)->try_lock(LockMode::kExclusive)));
  std::atomic<bool> opened{false};
  IoSettings s;
  std::thread rank([&] {
    auto e = Engine::open(o);
    if (e) s = (*e)->io_settings();
    opened = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(opened.load()) << "the probe did not wait for the drive's lock";
  other->reset();  // the other rank is done
  rank.join();
  ASSERT_TRUE(opened.load());
  EXPECT_EQ(s.drives.at(0).state, "probed") << describe(s);
}

TEST_F(TuningTest, ADriveAddedLaterIsProbedOnItsOwnAndTheOthersKeepTheirs) {
  auto sessions = fill(options({0}));
  {
    auto e = Engine::open(options({0}));
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    ASSERT_EQ((*e)->io_settings().drives[0].state, "probed");
  }
  // The new drive has the most room, so the next sessions' segments go there.
  auto more = fill(options({0, 1}), 2);
  auto e = Engine::open(options({0, 1}));
  ASSERT_TRUE(e.has_value()) << e.error().to_string();
  const IoSettings s = (*e)->io_settings();
  SCOPED_TRACE(describe(s));
  ASSERT_EQ(s.drives.size(), 2u);
  EXPECT_EQ(s.drives[0].state, "kept");
  EXPECT_EQ(s.drives[1].state, "probed");
  EXPECT_TRUE(fs::exists(tuning_file(1)));
  for (const auto& t : {sessions[0], more[0], more[1]}) {
    EXPECT_EQ(testing::restored_exact(**e, g_, t), t.size());
  }
}

// The ranks of a deployment read their per-rank stores on the same drives at once: one probe for
// all of them, kept above their directories, and each rank reads with all it found (the probe
// timed one reader), as a rank of TP 1 over the same drives does.
TEST_F(TuningTest, PerRankStoresShareOneProbeAndEachRankReadsWithAllOfIt) {
  auto rank_options = [&](uint32_t r, uint32_t tp) {
    Options o = options();
    o.geometry = testing::tiny_geometry(g_.chunk_tokens, r, tp);
    return o;
  };
  std::vector<std::vector<Token>> sessions[2];
  for (uint32_t r = 0; r < 2; ++r) sessions[r] = fill(rank_options(r, 2), 2);
  uint64_t tuned = 0;
  const IoSettings first = first_probe_of(rank_options(0, 2), tuned);
  ASSERT_EQ(first.drives.size(), 1u);
  EXPECT_EQ(first.staging_bytes, tuned) << describe(first);
  EXPECT_EQ(first.source, "tuned") << "one store, nothing to share";
  {
    // Neither rank probes again (a probe here would time the plain file, not the model).
    auto e = Engine::open(rank_options(0, 2));
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    EXPECT_EQ((*e)->io_settings().staging_bytes, first.staging_bytes);
    for (const auto& t : sessions[0])
      EXPECT_EQ(testing::restored_exact(**e, (*e)->geometry(), t), t.size());
  }
  {
    auto e = Engine::open(rank_options(1, 2));
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    const IoSettings s = (*e)->io_settings();
    SCOPED_TRACE(describe(s));
    EXPECT_EQ(s.drives[0].state, "kept");
    EXPECT_EQ(s.request_bytes, first.request_bytes);
    EXPECT_EQ(s.staging_bytes, first.staging_bytes);
    for (const auto& t : sessions[1])
      EXPECT_EQ(testing::restored_exact(**e, (*e)->geometry(), t), t.size());
    // tune() says what this rank's engines will read with.
    ModelScope scope(rewards_depth());
    auto told = (*e)->tune();
    ASSERT_TRUE(told.has_value()) << told.error().to_string();
    EXPECT_EQ(told->drives[0].state, "probed");
    EXPECT_EQ(told->staging_bytes,
              told->request_bytes * std::max<uint64_t>(told->drives[0].in_flight, 2));
    tuned = told->request_bytes * std::max<uint64_t>(told->drives[0].in_flight, 2);
  }
  {
    auto e = Engine::open(rank_options(0, 1));
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    const IoSettings s = (*e)->io_settings();
    SCOPED_TRACE(describe(s));
    EXPECT_EQ(s.source, "tuned");
    EXPECT_EQ(s.drives[0].state, "kept");
    EXPECT_EQ(s.staging_bytes, tuned);
  }
  size_t tunings = 0;
  for (const auto& f : fs::recursive_directory_iterator(root(0)))
    tunings += f.path().filename() == kTuningName;
  EXPECT_EQ(tunings, 1u) << "one tuning, in the stores' root, for every rank";
  EXPECT_TRUE(fs::exists(tuning_file(0)));
  // A rank on a drive of its own (no other rank's directory there) reads with all of its tuning.
  Options alone = rank_options(1, 2);
  alone.root = root(1);
  fill(alone);
  const IoSettings s = settings_at_open(alone, rewards_depth());
  SCOPED_TRACE(describe(s));
  ASSERT_EQ(s.drives.size(), 1u);
  EXPECT_EQ(s.drives[0].state, "probed");
  EXPECT_EQ(s.source, "tuned");
  EXPECT_EQ(s.staging_bytes, s.request_bytes * std::max<uint64_t>(s.drives[0].in_flight, 2));
}

// A drive whose tuning cannot be kept (the root above a per-rank store's directory that this
// process may not write) is not probed, which every open would otherwise do again: it is read
// with the defaults, and says why. chmod does not stop root, so where we are root the opens run
// in a child process as nobody.
TEST_F(TuningTest, ADriveWhoseTuningCannotBeKeptIsNotProbed) {
  const fs::path drive = dir_.path() / "shared";
  fs::create_directories(drive);
  fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::others_exec);
  fs::permissions(drive, fs::perms::all);
  EXPECT_EXIT(
      {
        if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(2);
        Options o = options();
        o.root = (drive / "root").string();
        const auto sessions = fill(o);
        if (::chmod(o.root.c_str(), 0555) != 0) std::_Exit(3);
        bool ok = true;
        for (int open = 0; open < 2; ++open) {
          ModelScope scope(rewards_depth());
          auto e = Engine::open(o);
          if (!e) std::_Exit(4);
          const IoSettings s = (*e)->io_settings();
          const std::string& state = s.drives.at(0).state;
          ok = ok && s.source == "defaults" &&
               state.starts_with("not tuned: its tuning could not be kept: ") &&
               state.find(o.root) != std::string::npos &&
               testing::restored_exact(**e, g_, sessions[0]) == sessions[0].size();
          auto told = (*e)->tune();
          ok = ok && told && told->drives.at(0).state == state;
          if (!ok) std::fprintf(stderr, "open %d: %s\n", open, describe(s).c_str());
        }
        ok = ok && !fs::exists(fs::path(o.root) / kTuningName);
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A TP-free store keeps each head group in a store of its own on the same drives: the rank's first
// store probes them once for all its parts and ranks. What the probe found is what one reader
// wants in flight, so every rank reads with all of it, its stores sharing it equally (two requests
// each at least): a rank holding every group splits it over them, each rank of a larger TP size
// holding one group (ranks replicating a head, TP above the KV heads, too) takes it whole, so a
// rank puts the same bytes in flight at any TP size. `tune()` says what engines will read with. The
// defaults are the rank's, split over its stores.
TEST_F(TuningTest, ATpFreeModelsStoresShareOneProbeAndEachRankTheSameBytesInFlightAtAnyTpSize) {
  Options o = options();
  o.store_format = 2;  // tiny's two KV heads: two head-group stores
  const uint64_t whole = o.resolved()->staging_bytes;
  {
    // Nothing to probe yet: the defaults, the rank's whole staging shown (each store has half).
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    EXPECT_EQ((*e)->io_settings().source, "defaults (staging split over 2 head-group stores)");
    EXPECT_EQ((*e)->io_settings().staging_bytes, whole);
  }
  auto sessions = fill(o, 2);
  uint64_t tuned = 0;
  const IoSettings first = first_probe_of(o, tuned);
  ASSERT_EQ(first.drives.size(), 1u);
  // The rank at TP 1 holds both groups: both shares, the whole.
  EXPECT_EQ(first.staging_bytes, 2 * tuned_share(tuned, first.request_bytes, 2).staging_bytes)
      << describe(first);
  EXPECT_EQ(first.staging_bytes, tuned) << describe(first);  // four in flight or more: no floor
  EXPECT_NE(first.source.find("in flight from each rank, over the 2 stores it reads"),
            std::string::npos)
      << first.source;
  {
    auto e = Engine::open(o);
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    EXPECT_EQ((*e)->io_settings().staging_bytes, first.staging_bytes);
    for (const auto& t : sessions) EXPECT_EQ(testing::restored_exact(**e, g_, t), t.size());
    // Saves go through the tuned stores too.
    sessions.push_back(synthetic::tokens(next_seed_++, 5000));
    ASSERT_OK(testing::save_synthetic(**e, g_, sessions.back()));
    EXPECT_EQ(testing::restored_exact(**e, g_, sessions.back()), sessions.back().size());
  }
  const uint64_t request = first.request_bytes;
  auto rank_options = [&](uint32_t r, uint32_t tp) {
    Options rank = o;
    rank.geometry.kv_heads = std::max(g_.kv_heads / tp, 1u);
    rank.geometry.kv_heads_total = g_.kv_heads;
    rank.geometry.tp_rank = r;
    rank.geometry.tp_world = tp;
    return rank;
  };
  // TP 2: a group each. TP 4: two ranks on each group (a writer and a follower). The tuning is
  // kept: every rank reads its one store with the whole, what the rank of TP 1 had over two.
  for (uint32_t tp : {2u, 4u}) {
    for (uint32_t r = 0; r < tp; ++r) {
      auto e = Engine::open(rank_options(r, tp));
      ASSERT_TRUE(e.has_value()) << e.error().to_string();
      const IoSettings s = (*e)->io_settings();
      SCOPED_TRACE(::testing::Message() << "rank " << r << " of TP " << tp << ": " << describe(s));
      EXPECT_EQ(s.drives[0].state, "kept");
      EXPECT_EQ(s.request_bytes, request);
      EXPECT_EQ(s.staging_bytes, tuned);
      EXPECT_EQ(s.staging_bytes, first.staging_bytes) << "the same bytes in flight as at TP 1";
      EXPECT_EQ((*e)->lookup(sessions[0]).value_or(0), sessions[0].size());
    }
  }
  // tune() on a rank of TP 2 says what its engines will read with, and they do.
  IoSettings told;
  {
    ModelScope scope(rewards_depth());
    auto e = Engine::open(rank_options(1, 2));
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    auto t = (*e)->tune();
    ASSERT_TRUE(t.has_value()) << t.error().to_string();
    told = *t;
  }
  {
    auto e = Engine::open(rank_options(1, 2));
    ASSERT_TRUE(e.has_value()) << e.error().to_string();
    SCOPED_TRACE(describe(told) + " | " + describe((*e)->io_settings()));
    EXPECT_EQ((*e)->io_settings().staging_bytes, told.staging_bytes);
    EXPECT_EQ((*e)->io_settings().request_bytes, told.request_bytes);
  }
  size_t tunings = 0;
  for (const auto& f : fs::recursive_directory_iterator(root(0)))
    tunings += f.path().filename() == kTuningName;
  EXPECT_EQ(tunings, 1u) << "one tuning, in the model's directory, for all its stores and ranks";
  expect_kept_through_failing_reads(o, first);
}

}  // namespace
}  // namespace kvtier
