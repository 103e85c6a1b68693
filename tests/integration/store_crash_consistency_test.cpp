// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Crash consistency of the store over a FaultFileSystem on a real directory: seeded random saves,
// drops, lookups and reopens, with a simulated power cut at a random file operation (a journal
// append, a checkpoint, a segment's creation or write, a manifest update, an open's recovery).
// After each cut the store reopens; every record acknowledged and not dropped or evicted reads back
// byte-exact; every record found either verifies or is a checksum miss (never wrong bytes). Also:
// EIO, ENOSPC and short writes on random operations give clear errors and leave the store intact.
// KVTIER_CRASH_SEED replays a run; KVTIER_STORE_CRASHES sets the number of cuts (default 100).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/checksum.hpp"
#include "common/keys.hpp"
#include "fault_file_system.hpp"
#include "store/index_log.hpp"
#include "store/store.hpp"
#include "store_util.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::CrashMode;
using testing::FaultFileSystem;
using testing::FsFault;
using testing::FsOp;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kSegment = 128 * kKiB;
constexpr uint64_t kCapacity = 1024 * kKiB;  // about six segments: saves evict

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 10) : fallback;
}

/// The store under test, the file system under it, and what it must hold.
class CrashHarness {
 public:
  /// A store on `drives` directories under `root`.
  CrashHarness(const std::string& root, uint64_t seed, CrashMode mode, int drives = 1)
      : random_(seed), mode_(mode), fs_(std::make_shared<FaultFileSystem>(seed)) {
    for (int d = 0; d < drives; ++d)
      roots_.push_back(drives == 1 ? root : fmt::format("{}/d{}", root, d));
  }

  FaultFileSystem& fs() { return *fs_; }
  std::mt19937_64& random() { return random_; }
  Store* store() { return store_.get(); }

  /// Every key's record is a function of the key: whatever copy is found must equal it.
  uint32_t tokens_of(uint64_t id) const { return 1 + static_cast<uint32_t>(id % g_.chunk_tokens); }
  std::vector<std::byte> payload_of(uint64_t id) const {
    std::vector<std::byte> p(g_.bytes_for_tokens(tokens_of(id)));
    std::mt19937_64 gen(id * 0x9e3779b97f4a7c15ULL + 1);
    for (size_t i = 0; i < p.size(); i += 8) {
      const uint64_t w = gen();
      std::memcpy(p.data() + i, &w, std::min<size_t>(8, p.size() - i));
    }
    return p;
  }
  static Key128 key_of(uint64_t id) { return {id, id * 7 + 1}; }

  Status open(std::optional<uint64_t> capacity = std::nullopt) {
    store_.reset();
    StoreConfig c;
    c.roots = roots_;
    c.geometry = g_;
    c.capacity_bytes = kCapacity;
    c.segment_bytes = kSegment;
    c.try_direct_io = false;  // records are written through the seam, whatever the file system
    c.fs = fs_;
    StoreRequest request;
    if (capacity) {
      request.capacity_bytes = capacity;
      request.capacity_bytes_source = "the test";
    }
    auto s = Store::open(c, log_, request);
    if (!s) return s.error();
    store_ = std::move(*s);
    return {};
  }
  void close() { store_.reset(); }

  /// Saves records of `ids`; acknowledged ones join what the store must hold.
  Status save(std::span<const uint64_t> ids) {
    std::vector<uint64_t> sizes;
    for (uint64_t id : ids) sizes.push_back(kBlock + align_up(g_.bytes_for_tokens(tokens_of(id))));
    auto placed = store_->reserve(sizes);
    if (!placed) return placed.error();
    std::vector<RecordMeta> metas;
    for (size_t i = 0; i < ids.size(); ++i) {
      const Placement& p = (*placed)[i];
      const std::vector<std::byte> payload = payload_of(ids[i]);
      RecordMeta m;
      m.key = key_of(ids[i]);
      m.segment = p.file->id;
      m.offset = p.offset;
      m.token_count = tokens_of(ids[i]);
      m.payload_bytes = payload.size();
      m.payload_checksum = kvsum::of(payload.data(), payload.size());
      m.sequence = p.sequence;
      std::vector<std::byte> image(m.record_bytes());
      encode_header(m, g_, ns_, std::span(image).first(kBlock));
      std::memcpy(image.data() + kBlock, payload.data(), payload.size());
      if (Status st = store_->write_bytes(*p.file, image, p.offset); !st.ok()) {
        store_->abort(*placed);
        return st;
      }
      metas.push_back(m);
    }
    KVTIER_TRY(store_->commit(metas, *placed));
    for (uint64_t id : ids) held_.insert(id);
    return {};
  }

  Status drop(std::span<const uint64_t> ids) {
    std::vector<Key128> keys;
    for (uint64_t id : ids) keys.push_back(key_of(id));
    KVTIER_TRY(store_->drop(keys));
    for (uint64_t id : ids) held_.erase(id);
    return {};
  }

  /// Forgets what the running store no longer holds (evicted, or dropped by a failed save).
  void sync_with_store() {
    std::erase_if(held_, [&](uint64_t id) { return !store_->contains(key_of(id)); });
  }

  /// Which segment each held record is in, by the running store.
  std::map<uint64_t, uint32_t> segments_of_held() {
    std::map<uint64_t, uint32_t> out;
    for (uint64_t id : held_) {
      if (auto r = store_->find(key_of(id))) out[id] = r->meta.segment;
    }
    return out;
  }

  enum class Read { kMissing, kIntact, kChecksumMiss, kUnreadable };
  /// Reads `id`'s record as a restore would check it. A record whose checksum passes must be the
  /// key's bytes exactly: anything else is wrong KV handed back (a test failure).
  Read read(uint64_t id) {
    auto r = store_->find(key_of(id));
    if (!r) return Read::kMissing;
    const RecordMeta& m = r->meta;
    std::vector<std::byte> image(m.record_bytes());
    if (!store_->read_bytes(*r->file, image, m.offset).ok()) return Read::kUnreadable;  // a miss
    RecordMeta header;
    const auto payload = std::span(image).subspan(kBlock, m.payload_bytes);
    if (!decode_header(std::span(image).first(kBlock), g_, header).ok() || header.key != m.key ||
        kvsum::of(payload.data(), payload.size()) != m.payload_checksum) {
      return Read::kChecksumMiss;
    }
    const std::vector<std::byte> want = payload_of(id);
    EXPECT_TRUE(m.payload_bytes == want.size() &&
                std::equal(payload.begin(), payload.end(), want.begin()))
        << "record " << id << " passed its checksum with bytes that are not its own";
    return Read::kIntact;
  }

  std::set<uint64_t>& held() { return held_; }
  CrashMode mode() const { return mode_; }

 private:
  std::vector<std::string> roots_;
  std::mt19937_64 random_;
  CrashMode mode_;
  std::shared_ptr<FaultFileSystem> fs_;
  KvGeometry g_ = testing::tiny_geometry(16);
  Key128 ns_ = namespace_key(testing::tiny_geometry(16), "");
  // KVTIER_TEST_STORE_LOG=1 shows what the store says (to replay a failing seed).
  Logger log_{LogSink{}, std::getenv("KVTIER_TEST_STORE_LOG") ? LogLevel::kDebug : LogLevel::kOff};
  std::unique_ptr<Store> store_;
  std::set<uint64_t> held_;  // acknowledged, and neither dropped nor evicted as far as we know
};

/// Random operations on the open store: saves (some of keys saved before), drops, lookups.
struct Workload {
  CrashHarness& h;
  uint64_t next_id = 1;
  std::set<uint64_t> in_flight_drop;  // what the last drop asked for

  Status step() {
    auto& rnd = h.random();
    const uint64_t pick = rnd() % 100;
    in_flight_drop.clear();
    if (pick < 65) {
      std::vector<uint64_t> ids;
      const uint64_t n = 1 + rnd() % 4;
      for (uint64_t i = 0; i < n; ++i) {
        // Now and then a key saved before (stored again, or already held and skipped).
        ids.push_back(next_id > 1 && rnd() % 5 == 0 ? 1 + rnd() % (next_id - 1) : next_id++);
      }
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      return h.save(ids);
    }
    if (pick < 80 && !h.held().empty()) {
      std::vector<uint64_t> ids;
      for (uint64_t id : h.held()) {
        if (rnd() % 4 == 0) ids.push_back(id);
      }
      in_flight_drop.insert(ids.begin(), ids.end());
      return h.drop(ids);
    }
    for (uint64_t id : h.held()) {
      if (rnd() % 8 == 0) {
        const auto read = h.read(id);
        EXPECT_TRUE(read == CrashHarness::Read::kIntact || read == CrashHarness::Read::kUnreadable)
            << "record " << id << " found damaged";
      }
    }
    return {};
  }
};

/// After a cut: reopens (a cut during the open is cut again, up to a few times) and checks.
void reopen_and_check(CrashHarness& h, const std::set<uint64_t>& required,
                      const std::map<uint64_t, uint32_t>& segment_of, bool segments_may_go,
                      uint64_t ids, const std::string& seed) {
  ASSERT_OK(h.open()) << seed;
  for (uint64_t id = 1; id < ids; ++id) h.read(id);      // whatever is found verifies or is a miss
  std::map<uint32_t, std::pair<int, int>> segment_seen;  // segment -> (missing, found)
  std::set<uint64_t> now;
  std::vector<uint64_t> missing;
  for (uint64_t id : required) {
    const auto read = h.read(id);
    ASSERT_TRUE(read == CrashHarness::Read::kIntact || read == CrashHarness::Read::kMissing)
        << seed << ": acknowledged record " << id << " is damaged or unreadable";
    auto& seen = segment_seen[segment_of.count(id) ? segment_of.at(id) : 0];
    (read == CrashHarness::Read::kIntact ? seen.second : seen.first) += 1;
    if (read == CrashHarness::Read::kMissing) missing.push_back(id);
  }
  for (uint64_t id : missing) {
    // The operation cut may have evicted a segment durably without the running store learning it
    // (a journal entry written back from the cache, an open's own eviction): a whole segment may
    // go, never part of one.
    const bool whole_segment_gone =
        segments_may_go && segment_of.count(id) && segment_seen[segment_of.at(id)].second == 0;
    ASSERT_TRUE(whole_segment_gone) << seed << ": acknowledged record " << id << " was lost";
  }
  h.held().clear();
  for (uint64_t id : required) {
    if (h.read(id) == CrashHarness::Read::kIntact) h.held().insert(id);
  }
}

/// Where a cut is aimed, in turn: anywhere, then at each kind of file the store writes.
struct Aim {
  const char* path_part;
  uint64_t within;  // the cut comes at one of the first `within` mutating calls there
};
// A checkpoint comes only once the journal has grown to its budget (hundreds of operations): one
// cut in ten waits for one.
// A manifest update is four calls on its path (the temporary file's creation, write and sync, the
// rename): one of them is cut.
constexpr Aim kAims[] = {{"", 60},         {"index.journal", 6}, {"seg-", 10},
                         {"", 60},         {"MANIFEST.json", 4}, {"index.journal", 6},
                         {"", 60},         {"seg-", 10},         {"", 60},
                         {"index.ckpt", 6}};
constexpr int kMaxStepsPerCut = 400;

void run_crashes(CrashMode mode, uint64_t crashes, int drives = 1) {
  const uint64_t seed = env_or("KVTIER_CRASH_SEED", std::random_device{}());
  std::cout << "KVTIER_CRASH_SEED=" << seed << " (" << crashes << " cuts)" << std::endl;
  testing::TempDir dir;
  CrashHarness h(dir.str(), seed, mode, drives);
  Workload w{h};
  std::map<std::string, int> points;
  ASSERT_OK(h.open());
  uint64_t capacity = kCapacity;
  for (uint64_t cut = 0; cut < crashes; ++cut) {
    const std::string at = fmt::format("seed {} cut {}", seed, cut);
    const Aim aim = kAims[cut % std::size(kAims)];
    const bool at_manifest = std::string_view(aim.path_part) == "MANIFEST.json";
    if (at_manifest) {
      // Another capacity: the first save rewrites the manifest.
      capacity = capacity == kCapacity ? kCapacity + kSegment : kCapacity;
      h.close();
      ASSERT_OK(h.open(capacity)) << at;
    }
    h.fs().crash_after(1 + h.random()() % aim.within, mode, aim.path_part);
    std::map<uint64_t, uint32_t> segment_of = h.segments_of_held();
    bool opening = false;  // the cut came while the store opened (its recovery may evict)
    for (int steps = 0;; ++steps) {
      const Status st = w.step();
      if (h.fs().crashed()) break;
      ASSERT_TRUE(st.ok() || st.code() == ErrorCode::kCapacity) << at << ": " << st.to_string();
      h.sync_with_store();
      if (::testing::Test::HasFailure()) return;
      segment_of = h.segments_of_held();
      if (steps == kMaxStepsPerCut) {
        h.fs().crash(mode);  // a cut between operations
        break;
      }
      // A clean close and reopen, either of which may be cut; never before the manifest's cut,
      // since an engine that closes before its first save leaves the store's capacity as it was.
      if (h.random()() % 10 == 0 && !at_manifest) {
        h.close();
        opening = true;
        if (!h.open().ok()) break;
        opening = false;
      }
    }
    // Grouped by kind of file: seg-00000012.kvt counts as seg-#.kvt.
    points[std::regex_replace(h.fs().crash_point(), std::regex("[0-9]+"), "#")] += 1;
    // What the store held when the power went, less what the operation cut may have removed.
    std::set<uint64_t> required;
    if (h.store() != nullptr) h.sync_with_store();
    for (uint64_t id : h.held()) {
      if (!w.in_flight_drop.contains(id)) required.insert(id);
    }
    h.close();
    h.fs().recover();
    reopen_and_check(h, required, segment_of, opening || mode == CrashMode::kKeepSome, w.next_id,
                     at);
    if (::testing::Test::HasFailure()) return;
  }
  // The cuts came everywhere the store writes.
  std::string seen;
  for (const auto& [point, n] : points) seen += fmt::format("{}x {}; ", n, point);
  std::cout << "cut at: " << seen << std::endl;
  for (const char* where : {"index.journal", "index.ckpt", "seg-", "MANIFEST.json"}) {
    EXPECT_NE(seen.find(where), std::string::npos) << "no cut at " << where << ": " << seen;
  }
}

TEST(StoreCrashConsistency, AcknowledgedRecordsSurviveEveryPowerCut) {
  run_crashes(CrashMode::kDropUnsynced, env_or("KVTIER_STORE_CRASHES", 100));
}

TEST(StoreCrashConsistency, AcknowledgedRecordsSurviveEveryPowerCutOverTwoDrives) {
  run_crashes(CrashMode::kDropUnsynced, env_or("KVTIER_STORE_CRASHES", 100) / 2, 2);
}

TEST(StoreCrashConsistency, PartlyWrittenBackCachesNeverYieldWrongBytes) {
  run_crashes(CrashMode::kKeepSome, env_or("KVTIER_STORE_CRASHES", 100));
}

/// Checks every record the harness holds reads back intact.
void expect_all_intact(CrashHarness& h, const std::string& at) {
  for (uint64_t id : h.held()) {
    ASSERT_EQ(h.read(id), CrashHarness::Read::kIntact) << at << ": record " << id;
  }
}

/// Injected faults of every kind, or (`second_drive_syncs`) only failing directory syncs of the
/// second drive each followed by a power cut: clear errors, nothing acknowledged lost.
void run_faults(int drives, bool second_drive_syncs = false) {
  const uint64_t seed = env_or("KVTIER_CRASH_SEED", std::random_device{}());
  std::cout << "KVTIER_CRASH_SEED=" << seed << std::endl;
  testing::TempDir dir;
  CrashHarness h(dir.str(), seed, CrashMode::kDropUnsynced, drives);
  Workload w{h};
  ASSERT_OK(h.open());
  auto& rnd = h.random();
  constexpr FsOp kOps[] = {FsOp::kWrite,    FsOp::kSync,     FsOp::kOpen,    FsOp::kRename,
                           FsOp::kAllocate, FsOp::kTruncate, FsOp::kSyncDir, FsOp::kRemove,
                           FsOp::kRead,     FsOp::kStat};
  constexpr const char* kParts[] = {"", "index.journal", "index.ckpt", "seg-", "MANIFEST.json"};
  for (int round = 0; round < (second_drive_syncs ? 60 : 200); ++round) {
    FsFault f;
    f.op = kOps[rnd() % std::size(kOps)];
    f.path_part = kParts[rnd() % std::size(kParts)];
    f.nth = 1 + rnd() % 4;
    f.times = rnd() % 4 == 0 ? UINT64_MAX : 1 + rnd() % 2;
    f.error = rnd() % 2 == 0 ? EIO : ENOSPC;
    if (f.op == FsOp::kWrite && rnd() % 2 == 0) f.written = rnd() % 8192;  // short or torn
    if (second_drive_syncs) f = {.op = FsOp::kSyncDir, .path_part = "d1/rank", .nth = f.nth};
    const std::string at =
        fmt::format("seed {} round {}: {} fault #{} on '{}' ({}x, {} bytes)", seed, round,
                    static_cast<int>(f.op), f.nth, f.path_part, f.times, f.written);
    h.fs().add_fault(f);
    std::set<uint64_t> maybe_dropped;  // asked for by a drop that failed: it may yet take effect
    std::map<uint64_t, uint32_t> segment_of = h.segments_of_held();
    for (int i = 0; i < (second_drive_syncs ? 40 : 6); ++i) {
      Status st = w.step();
      if (!st.ok()) maybe_dropped.insert(w.in_flight_drop.begin(), w.in_flight_drop.end());
      if (rnd() % 8 == 0) {  // a reopen under the fault: it works or says what failed
        // What this step evicted, and where a record it stored again now is, are learnt before
        // the close: a reopen that fails leaves no store to ask, and a stale `held` or
        // `segment_of` would count an evicted record as lost (or its segment as partly gone).
        h.sync_with_store();
        segment_of = h.segments_of_held();
        h.close();
        st = h.open();
        if (!st.ok()) {
          EXPECT_NE(st.to_string().find("injected"), std::string::npos)
              << at << ": " << st.to_string();
          break;
        }
      }
      EXPECT_TRUE(st.ok() || st.code() == ErrorCode::kCapacity ||
                  st.to_string().find("injected") != std::string::npos)
          << at << ": an unclear error: " << st.to_string();
      h.sync_with_store();
      segment_of = h.segments_of_held();
    }
    h.fs().clear_faults();
    if (h.store() != nullptr) {
      ASSERT_NO_FATAL_FAILURE(expect_all_intact(h, at));
    }
    // Whatever the fault did, the store reopens with everything it held (a failed save's eviction
    // or a failed drop whose journal entry could not be cut back may still take effect).
    std::set<uint64_t> required;
    for (uint64_t id : h.held()) {
      if (!maybe_dropped.contains(id)) required.insert(id);
    }
    if (h.store() != nullptr) segment_of = h.segments_of_held();
    if (second_drive_syncs) h.fs().crash(CrashMode::kDropUnsynced);  // unlinks not durable undone
    h.close();
    if (second_drive_syncs) h.fs().recover();
    reopen_and_check(h, required, segment_of, true, w.next_id, at);
    if (::testing::Test::HasFailure()) return;
    // And takes saves again.
    const uint64_t id = w.next_id++;
    ASSERT_OK(h.save(std::span(&id, 1))) << at;
    h.sync_with_store();
  }
}

TEST(StoreFaults, InjectedErrorsAreClearAndLeaveTheStoreIntact) { run_faults(1); }

TEST(StoreFaults, InjectedErrorsOverTwoDrivesAreClearAndLeaveTheStoreIntact) { run_faults(2); }

// The second drive's directory syncs fail (a checkpoint's included, which goes on with a warning),
// and a power cut follows each round: undurable unlinks come back, and the store still opens with
// every acknowledged record.
TEST(StoreFaults, FailedDirectorySyncsOfASecondDriveThenPowerCutsLoseNothing) {
  run_faults(2, /*second_drive_syncs=*/true);
}

TEST(StoreCrashConsistency, PartlyWrittenBackCachesOverTwoDrivesNeverYieldWrongBytes) {
  run_crashes(CrashMode::kKeepSome, env_or("KVTIER_STORE_CRASHES", 100) / 2, 2);
}

// The highest id handed out, its segment gone, must outlive a damaged checkpoint: the journal a
// checkpoint empties names it again. Where writing it there fails, the checkpoint still stands,
// and the next open writes it.
TEST(StoreFaults, TheHighestIdOutlivesAFailedWriteOfItToTheJournalAndThenADamagedCheckpoint) {
  testing::TempDir dir;
  CrashHarness h(dir.str(), 11, CrashMode::kDropUnsynced);
  auto segment_ids = [&] {
    std::vector<uint32_t> ids;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
      const std::string n = e.path().filename().string();
      if (n.starts_with("seg-")) ids.push_back(static_cast<uint32_t>(std::stoul(n.substr(4))));
    }
    return ids;
  };
  const uint64_t first = 1, second = 2;
  ASSERT_OK(h.open());
  ASSERT_OK(h.save(std::span(&first, 1)));
  h.close();
  ASSERT_EQ(segment_ids().size(), 1u);
  const uint32_t gone = segment_ids()[0];
  std::filesystem::path rank;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (e.path().filename() == "index.journal") rank = e.path().parent_path();
  }
  ASSERT_NO_FATAL_FAILURE(testing::journal_drop(rank.string(), gone));  // its segment evicted
  ASSERT_OK(h.open());  // the drop applied: the file goes
  h.close();
  ASSERT_TRUE(segment_ids().empty());
  std::filesystem::remove(rank / "index.ckpt");  // the next open writes a checkpoint
  h.fs().add_fault({.op = FsOp::kWrite, .path_part = "index.journal", .nth = 1, .error = EIO});
  Status opened = h.open();
  h.fs().clear_faults();
  ASSERT_OK(opened) << "a checkpoint was written: the open stands";
  h.close();
  ASSERT_EQ(std::filesystem::file_size(rank / "index.journal"), 0u) << "the write did not fail";
  ASSERT_OK(h.open());  // writes the highest id to the journal now
  h.close();
  EXPECT_EQ(std::filesystem::file_size(rank / "index.journal"),
            journal_entry_bytes(JournalOp::kUse));
  testing::flip_byte(rank / "index.ckpt", 24);  // the checkpoint's checksum
  ASSERT_OK(h.open());                          // a rebuild
  ASSERT_OK(h.save(std::span(&second, 1)));
  h.close();
  ASSERT_EQ(segment_ids().size(), 1u);
  EXPECT_GT(segment_ids()[0], gone) << "the gone segment's id was handed out again";
}

}  // namespace
}  // namespace kvtier
