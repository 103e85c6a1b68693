// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Damage to the store on disk: a wrong byte is never served, the rest stays usable.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/magic.h>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "crash_workload.hpp"
#include "store_util.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

class StoreFaultTest : public ::testing::Test {
 protected:
  Options options() const { return testing::small_options(dir_.str(), g_); }
  std::unique_ptr<Engine> open(const Options& o) {
    auto e = Engine::open(o);
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  void save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    ASSERT_OK(e.save(tokens, kv.view));
  }
  /// Restores; checks every restored byte; returns the result.
  RestoreResult restore_checked(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    auto r = e.restore(tokens, kv.view);
    EXPECT_TRUE(testing::is_ok(r));
    if (!r) return {};
    EXPECT_EQ(
        synthetic::first_mismatch(g_, tokens.first(r->tokens_restored), kv.span(), tokens.size()),
        r->tokens_restored);
    return *r;
  }
  std::vector<fs::path> segment_files() const {
    std::vector<fs::path> out;
    for (auto& entry : fs::directory_iterator(dir_.path() / "rank0of1")) {
      if (entry.path().extension() == ".kvt") out.push_back(entry.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The id of the store's one segment file.
  uint32_t only_segment_id() const {
    const auto files = segment_files();
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? 0
                         : static_cast<uint32_t>(std::stoul(files[0].stem().string().substr(4)));
  }
  /// Appends a drop of segment `id` to the closed store's journal.
  void journal_drop(uint32_t id) const { testing::journal_drop(dir_.str() + "/rank0of1", id); }
  static void flip_byte(const fs::path& file, uint64_t offset) { testing::flip_byte(file, offset); }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
};

// One 256-token chunk of tiny weighs 256 KiB: its record is 4 KiB header + 256 KiB payload.
constexpr uint64_t kRecord = 4096 + 256 * 1024;

TEST_F(StoreFaultTest, FlippedPayloadBitIsAMissAndTheRecordIsDropped) {
  auto tokens = synthetic::tokens(1, 1024);
  {
    auto e = open(options());
    save(*e, tokens);
  }
  flip_byte(segment_files()[0], 2 * kRecord + 4096 + 777);  // payload of chunk 2
  auto e = open(options());
  RestoreResult r = restore_checked(*e, tokens);
  EXPECT_EQ(r.tokens_restored, 512u);
  EXPECT_EQ(r.checksum_misses, 1u);
  EXPECT_FALSE(r.problem.empty());
  EXPECT_EQ(e->stats().checksum_misses, 1u);
  EXPECT_EQ(*e->lookup(tokens), 512u);  // dropped: later lookups no longer promise it
}

TEST_F(StoreFaultTest, FlippedHeaderBitIsAMiss) {
  auto tokens = synthetic::tokens(2, 1024);
  {
    auto e = open(options());
    save(*e, tokens);
  }
  flip_byte(segment_files()[0], kRecord + 20);  // key of chunk 1's header
  auto e = open(options());
  RestoreResult r = restore_checked(*e, tokens);
  EXPECT_EQ(r.tokens_restored, 256u);
  EXPECT_EQ(r.checksum_misses, 1u);
}

TEST_F(StoreFaultTest, VerifyFindsAndDropsCorruptRecords) {
  auto tokens = synthetic::tokens(3, 2048);
  {
    auto e = open(options());
    save(*e, tokens);
  }
  flip_byte(segment_files()[0], 5 * kRecord + 4096 + 12345);
  auto e = open(options());
  auto report = e->verify({});
  ASSERT_OK(report);
  EXPECT_EQ(report->records_checked, 8u);
  EXPECT_EQ(report->corrupt_records, 1u);
  EXPECT_EQ(report->problems.size(), 1u);
  EXPECT_EQ(e->verify({})->corrupt_records, 0u);
  EXPECT_EQ(restore_checked(*e, tokens).tokens_restored, 5u * 256);
}

TEST_F(StoreFaultTest, TruncatedSegmentDropsWhatItLostAndServesTheRest) {
  auto tokens = synthetic::tokens(4, 2048);
  {
    auto e = open(options());
    save(*e, tokens);
  }
  fs::resize_file(segment_files()[0], 3 * kRecord + 1000);
  auto e = open(options());
  EXPECT_EQ(e->stats().dropped_at_open, 5u);
  EXPECT_EQ(restore_checked(*e, tokens).tokens_restored, 3u * 256);
}

TEST_F(StoreFaultTest, DeletedSegmentIsForgottenAtOpen) {
  Options o = options();
  auto a = synthetic::tokens(5, 40 * 256);  // 10 MB each: two sessions need two 16 MiB segments
  auto b = synthetic::tokens(6, 40 * 256);
  {
    auto e = open(o);
    save(*e, a);
    save(*e, b);
  }
  auto files = segment_files();
  ASSERT_GE(files.size(), 2u);
  fs::remove(files.back());  // b's tail lived there; all of a and b's head are in the first
  auto e = open(o);
  EXPECT_GT(e->stats().dropped_at_open, 0u);
  EXPECT_EQ(restore_checked(*e, a).tokens_restored, a.size());
  const uint64_t b_left = restore_checked(*e, b).tokens_restored;
  EXPECT_GT(b_left, 0u);
  EXPECT_LT(b_left, b.size());
}

TEST_F(StoreFaultTest, CorruptCheckpointIsRebuiltFromSegmentHeaders) {
  auto tokens = synthetic::tokens(7, 1500);
  {
    auto e = open(options());
    save(*e, tokens);
  }
  { std::ofstream(dir_.str() + "/rank0of1/index.ckpt") << "KVTCKPT1 but not really a checkpoint"; }
  auto e = open(options());
  EXPECT_EQ(e->stats().recovered_records, 6u);
  EXPECT_EQ(restore_checked(*e, tokens).tokens_restored, 1500u);
}

// A rebuild finds records by their headers: one whose payload a crash left torn (a write never
// acknowledged) comes back too. It is read and dropped at that open, so a later save of its key
// stores the key again instead of taking the damaged copy for it; the intact ones are kept.
TEST_F(StoreFaultTest, ARecordARebuildFindsDamagedIsDroppedSoASaveStoresItAgain) {
  auto tokens = synthetic::tokens(7, 1500);  // six records
  {
    auto e = open(options());
    save(*e, tokens);
  }
  ASSERT_EQ(segment_files().size(), 1u);
  flip_byte(segment_files()[0], kBlock + 10);  // the first record's payload
  { std::ofstream(dir_.str() + "/rank0of1/index.ckpt") << "KVTCKPT1 but not really a checkpoint"; }
  auto e = open(options());
  EXPECT_EQ(e->stats().checksum_misses, 1u);
  auto found = e->lookup(tokens);
  ASSERT_OK(found);
  EXPECT_EQ(*found, 0u);  // the first chunk is gone, and with it every longer prefix
  HostKv kv(g_, tokens.size());
  synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
  auto saved = e->save(tokens, kv.view);
  ASSERT_OK(saved);
  EXPECT_EQ(saved->chunks_written, 1u);
  EXPECT_EQ(saved->chunks_present, 5u);
  EXPECT_EQ(restore_checked(*e, tokens).tokens_restored, 1500u);
}

TEST_F(StoreFaultTest, JournalDamagedMidwayIsRebuiltFromSegmentHeaders) {
  auto a = synthetic::tokens(8, 1500);
  auto b = synthetic::tokens(9, 1500);
  {
    auto e = open(options());
    save(*e, a);
    save(*e, b);
  }
  flip_byte(dir_.str() + "/rank0of1/index.journal", 30);  // inside the first entry
  auto e = open(options());
  EXPECT_EQ(restore_checked(*e, a).tokens_restored, 1500u);
  EXPECT_EQ(restore_checked(*e, b).tokens_restored, 1500u);
}

// The newest segment was evicted (its drop is in the journal, its file gone) and the segment that
// was to replace it never came to be (say, fallocate hit ENOSPC). The next open must not hand the
// evicted segment's id to a new segment: replaying the old drop would then forget its records.
TEST_F(StoreFaultTest, SegmentIdOfAnEvictedSegmentIsNeverReused) {
  auto a = synthetic::tokens(30, 1000);
  auto b = synthetic::tokens(31, 70 * 256);  // more than one 16 MiB segment holds (63 chunks)
  {
    auto e = open(options());
    save(*e, a);
  }
  ASSERT_EQ(segment_files().size(), 1u);
  ASSERT_NO_FATAL_FAILURE(journal_drop(2));
  {
    auto e = open(options());
    save(*e, b);
  }  // b's tail goes into a second segment
  auto e = open(options());
  EXPECT_EQ(e->stats().dropped_at_open, 0u);
  EXPECT_EQ(restore_checked(*e, b).tokens_restored, b.size());
  EXPECT_EQ(restore_checked(*e, a).tokens_restored, a.size());
}

TEST_F(StoreFaultTest, IdOfAGoneSegmentIsNotHandedOutAgainOnceACheckpointForgetsItsDrop) {
  // An eviction's unlink that is not yet durable can come back after a power cut: a new segment of
  // the same id on another drive would leave a store that does not open ("on two drives").
  auto a = synthetic::tokens(40, 1000);
  {
    auto e = open(options());
    save(*e, a);
  }
  const std::string dir = dir_.str() + "/rank0of1";
  const uint32_t first_id = only_segment_id();
  ASSERT_NO_FATAL_FAILURE(journal_drop(first_id));
  { auto e = open(options()); }  // the drop applied: the segment file goes
  ASSERT_TRUE(segment_files().empty());
  // A checkpoint then compacts the journal that held the drop (one is written at an open that
  // finds none; no segment file is left that would call for a rebuild instead).
  fs::remove(dir + "/index.ckpt");
  { auto e = open(options()); }
  ASSERT_TRUE(fs::exists(dir + "/index.ckpt"));
  auto e = open(options());
  save(*e, synthetic::tokens(41, 1000));
  EXPECT_GT(only_segment_id(), first_id);
}

TEST_F(StoreFaultTest, IdOfAGoneSegmentOutlivesACompactionAndThenADamagedCheckpoint) {
  // Once a checkpoint has compacted the drop away, only it holds the highest id; a rebuild (its
  // damage calls for one) must still find that id in what it reads.
  {
    auto e = open(options());
    save(*e, synthetic::tokens(45, 1000));
  }
  const std::string dir = dir_.str() + "/rank0of1";
  const uint32_t first_id = only_segment_id();
  ASSERT_NO_FATAL_FAILURE(journal_drop(first_id));
  { auto e = open(options()); }
  ASSERT_TRUE(segment_files().empty());
  fs::remove(dir + "/index.ckpt");
  { auto e = open(options()); }        // writes a checkpoint, which empties the journal
  flip_byte(dir + "/index.ckpt", 24);  // its checksum
  auto e = open(options());
  save(*e, synthetic::tokens(46, 1000));
  EXPECT_GT(only_segment_id(), first_id);
}

TEST_F(StoreFaultTest, IdsTheJournalNamesAreNotHandedOutAgainByARebuild) {
  // A damaged checkpoint: the index is rebuilt from the segment files, and a segment the journal
  // says was dropped (its file gone, or going) keeps its id from new segments.
  {
    auto e = open(options());
    save(*e, synthetic::tokens(50, 1000));
  }
  const std::string dir = dir_.str() + "/rank0of1";
  const uint32_t gone = only_segment_id();
  ASSERT_NO_FATAL_FAILURE(journal_drop(gone));
  fs::remove(segment_files()[0]);
  flip_byte(dir + "/index.ckpt", 24);  // its checksum
  auto e = open(options());
  save(*e, synthetic::tokens(51, 1000));
  EXPECT_GT(only_segment_id(), gone);
}

TEST_F(StoreFaultTest, ManifestDamageIsAClearError) {
  { auto e = open(options()); }
  { std::ofstream(dir_.str() + "/rank0of1/MANIFEST.json") << "{ not json"; }
  auto e = Engine::open(options());
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kCorrupt);
}

TEST_F(StoreFaultTest, EvictionKeepsTheStoreWithinCapacityAtAllTimes) {
  Options o = options();
  o.capacity_bytes = 64 << 20;  // three 16 MiB segments and the index files
  auto e = open(o);
  std::vector<std::vector<Token>> sessions;
  for (int i = 0; i < 12; ++i) {
    sessions.push_back(synthetic::tokens(200 + i, 6000));  // ~6 MB each
    save(*e, sessions.back());
    uint64_t on_disk = 0;
    for (auto& f : segment_files()) on_disk += fs::file_size(f);
    ASSERT_LE(on_disk, o.capacity_bytes) << "after session " << i;
    ASSERT_LE(e->stats().used_bytes, o.capacity_bytes);
  }
  EXPECT_GT(e->stats().evicted_segments, 0u);
  EXPECT_EQ(restore_checked(*e, sessions.back()).tokens_restored, 6000u);
  EXPECT_LT(*e->lookup(sessions.front()), 6000u);  // the oldest went first
}

TEST_F(StoreFaultTest, EvictingASegmentDropsOnlyTheRecordsStillInIt) {
  Options o = options();
  o.capacity_bytes = 64 << 20;  // three 16 MiB segments of 63 records each, and the index files
  auto e = open(o);
  auto a = synthetic::tokens(500, 10 * 256);
  auto b = synthetic::tokens(501, 5 * 256);
  save(*e, a);
  ASSERT_TRUE(testing::is_ok(e->evict(a)));
  save(*e, b);  // b dropped and stored again, both copies in segment 1
  ASSERT_TRUE(testing::is_ok(e->evict(b)));
  save(*e, b);
  save(*e, synthetic::tokens(502, 60 * 256));  // the rest of segment 1, then segment 2
  save(*e, a);  // a's keys again, now in segment 2: segment 1 still lists them
  // Until the store is full and one segment goes: segment 1, the least recently used.
  for (uint64_t seed = 503; e->stats().evicted_segments == 0 && seed < 520; ++seed) {
    save(*e, synthetic::tokens(seed, 20 * 256));
  }
  ASSERT_EQ(e->stats().evicted_segments, 1u);
  EXPECT_EQ(*e->lookup(b), 0u);
  EXPECT_EQ(restore_checked(*e, a).tokens_restored, a.size());
  const Stats live = e->stats();
  e.reset();
  auto reopened =
      open(o);  // the index as the journal rebuilds it agrees with the one kept in memory
  EXPECT_EQ(reopened->stats().records, live.records);
  EXPECT_EQ(reopened->stats().live_bytes, live.live_bytes);
  EXPECT_EQ(restore_checked(*reopened, a).tokens_restored, a.size());
}

TEST_F(StoreFaultTest, DramTierServesWhatItHoldsWithoutReadingTheDisk) {
  Options o = options();
  o.dram_bytes = 8 << 20;  // 31 slabs of 260 KiB: room for one 7-chunk session, not for three
  auto e = open(o);
  auto a = synthetic::tokens(400, 7 * 256);
  save(*e, a);
  // Damage every payload on disk: a restore that touched the disk would miss.
  for (uint64_t r = 0; r < 7; ++r) flip_byte(segment_files()[0], r * kRecord + 4096 + 99);
  RestoreResult hit = restore_checked(*e, a);
  EXPECT_EQ(hit.tokens_restored, a.size());
  EXPECT_EQ(hit.checksum_misses, 0u);
  EXPECT_EQ(hit.bytes_read, 0u);
  EXPECT_EQ(e->stats().dram_hits, 7u);
  // Push `a` out of the tier: now the damaged disk copy is what is read, and it is a miss.
  save(*e, synthetic::tokens(401, 16 * 256));
  save(*e, synthetic::tokens(402, 16 * 256));
  RestoreResult miss = restore_checked(*e, a);
  EXPECT_EQ(miss.tokens_restored, 0u);
  EXPECT_GT(miss.checksum_misses, 0u);
}

TEST_F(StoreFaultTest, SessionLargerThanCapacityIsRefused) {
  Options o = options();
  o.capacity_bytes = 32 << 20;
  auto e = open(o);
  auto tokens = synthetic::tokens(300, 40000);  // 40 MB
  HostKv kv(g_, tokens.size());
  synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
  auto r = e->save(tokens, kv.view);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kCapacity);
}

/// Saves and restores through an engine on `root` and returns its stats.
Stats round_trip_on(const std::string& root) {
  KvGeometry g = testing::tiny_geometry();
  Options o = testing::small_options(root, g);
  o.io_path = IoPath::kDirect;
  auto e = Engine::open(o);
  EXPECT_TRUE(testing::is_ok(e));
  if (!e) return {};
  auto tokens = synthetic::tokens(1, 700);
  HostKv kv(g, tokens.size());
  synthetic::fill_kv(g, tokens, kv.span(), tokens.size());
  EXPECT_OK((*e)->save(tokens, kv.view));
  HostKv out(g, tokens.size());
  auto r = (*e)->restore(tokens, out.view);
  EXPECT_TRUE(testing::is_ok(r));
  EXPECT_EQ(r.value_or(RestoreResult{}).tokens_restored, 700u);
  EXPECT_EQ(synthetic::first_mismatch(g, tokens, out.span(), tokens.size()), 700u);
  return (*e)->stats();
}

TEST(StoreFallback, TmpfsGetsODirectOnlyWhereTheKernelAllowsIt) {
  struct statfs st {};
  if (::statfs("/dev/shm", &st) != 0 || st.f_type != TMPFS_MAGIC)
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  testing::TempDir dir(fs::path("/dev/shm"));
  Stats s = round_trip_on(dir.str());
  // tmpfs takes O_DIRECT since Linux 6.6 and refuses it before; either way the engine must say
  // which.
  if (s.io_fallback.empty()) {
    EXPECT_NE(s.io_engine.find("O_DIRECT"), std::string::npos) << s.io_engine;
  } else {
    EXPECT_NE(s.io_fallback.find("O_DIRECT refused"), std::string::npos) << s.io_fallback;
    EXPECT_NE(s.io_engine.find("buffered"), std::string::npos) << s.io_engine;
  }
}

/// A ramfs mounted for one test: a filesystem that refuses O_DIRECT on every kernel.
class RamfsMount {
 public:
  RamfsMount() : dir_() {
    mounted_ = ::mount("kvtier-test", dir_.str().c_str(), "ramfs", 0, nullptr) == 0;
  }
  ~RamfsMount() {
    if (mounted_) ::umount(dir_.str().c_str());
  }
  [[nodiscard]] bool mounted() const { return mounted_; }
  [[nodiscard]] std::string str() const { return dir_.str(); }

 private:
  testing::TempDir dir_;
  bool mounted_ = false;
};

TEST(StoreFallback, FilesystemRefusingODirectFallsBackToBufferedAndSaysSo) {
  RamfsMount ramfs;
  if (!ramfs.mounted())
    GTEST_SKIP() << "cannot mount a ramfs here (needs root): " << std::strerror(errno);
  Stats s = round_trip_on(ramfs.str());
  EXPECT_NE(s.io_fallback.find("O_DIRECT refused"), std::string::npos) << s.io_fallback;
  EXPECT_NE(s.io_engine.find("buffered"), std::string::npos) << s.io_engine;
}

TEST(StoreLock, SecondProcessOnTheSameRankIsRefused) {
  testing::TempDir dir;
  // The helper opens the crash workload's store: same geometry as here.
  Options o = crash_workload::options(dir.str());
  auto run_helper = [&] {
    std::string cmd = std::string(KVTIER_TEST_HELPER) + " open " + dir.str() + " 2>/dev/null";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run_helper(), 0);  // nobody holds it: the helper opens and exits
  auto e = Engine::open(o);
  ASSERT_OK(e);
  EXPECT_EQ(run_helper(), 3);  // kLocked
}

}  // namespace
}  // namespace kvtier
