// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Re-read before drop: a record that fails a check on a restore (or verify) is read once more
// through the page cache and verified on the host; only a record that fails twice is dropped. A
// read corrupted once on its way (a data-path fault, injected here through the I/O engine) keeps
// the record and still serves it; a record damaged on disk is dropped.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "fault_engine.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::Fault;
using testing::FaultScope;
using testing::HostKv;

// One 256-token chunk of tiny weighs 256 KiB: its record is 4 KiB header + 256 KiB payload.
constexpr uint64_t kRecord = 4096 + 256 * 1024;

class RecheckTest : public ::testing::TestWithParam<IoPath> {
 protected:
  std::unique_ptr<Engine> open() {
    Options o = testing::small_options(dir_.str(), g_);
    o.io_path = GetParam();
    auto e = Engine::open(o);
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  void save(Engine& e) {
    HostKv kv(g_, tokens_.size());
    synthetic::fill_kv(g_, tokens_, kv.span(), tokens_.size());
    ASSERT_OK(e.save(tokens_, kv.view));
  }
  /// Restores into host memory and checks every restored byte.
  RestoreResult restore_checked(Engine& e) {
    HostKv kv(g_, tokens_.size());
    auto r = e.restore(tokens_, kv.view);
    EXPECT_TRUE(testing::is_ok(r));
    if (!r) return {};
    EXPECT_EQ(synthetic::first_mismatch(g_, std::span(tokens_).first(r->tokens_restored), kv.span(),
                                        tokens_.size()),
              r->tokens_restored);
    return *r;
  }
  fs::path segment() const {
    for (auto& entry : fs::directory_iterator(dir_.path() / "rank0of1")) {
      if (entry.path().extension() == ".kvt") return entry.path();
    }
    return {};
  }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
  std::vector<Token> tokens_ = synthetic::tokens(77, 1024);  // four records
};

/// Inverts one payload byte of chunk 2 in the first read that carries it, once.
FaultScope corrupt_chunk2_once(std::atomic<int>& injected) {
  return FaultScope([&injected](const IoRequest& r, uint64_t) {
    const uint64_t target = 2 * kRecord + 4096 + 777;
    if (r.write || target < r.offset || target >= r.offset + r.length || injected.exchange(1) != 0)
      return Fault{};
    Fault f;
    f.inject = true;
    f.transfer = r.length;
    f.result = r.length;
    f.flip_at = static_cast<int64_t>(target - r.offset);
    return f;
  });
}

TEST_P(RecheckTest, ReadCorruptedOnceOnItsWayKeepsTheRecordAndServesIt) {
  auto e = open();
  save(*e);
  std::atomic<int> injected{0};
  RestoreResult r;
  {
    FaultScope faults = corrupt_chunk2_once(injected);
    r = restore_checked(*e);
  }
  ASSERT_EQ(injected.load(), 1) << "the fault was not injected: the test would prove nothing";
  EXPECT_EQ(r.tokens_restored, tokens_.size()) << r.problem;
  EXPECT_EQ(r.checksum_misses, 0u);
  EXPECT_EQ(r.recheck_kept, 1u);
  const Stats s = e->stats();
  EXPECT_EQ(s.recheck_kept, 1u);
  EXPECT_EQ(s.recheck_dropped, 0u);
  EXPECT_EQ(s.checksum_misses, 0u);
  EXPECT_EQ(s.records, 4u);
  // Kept for good: the next restore and a reopened store still serve every token.
  EXPECT_EQ(restore_checked(*e).tokens_restored, tokens_.size());
  e.reset();
  e = open();
  EXPECT_EQ(e->lookup(tokens_).value(), tokens_.size());
  EXPECT_EQ(restore_checked(*e).tokens_restored, tokens_.size());
}

TEST_P(RecheckTest, RecordDamagedOnDiskFailsTwiceAndIsDropped) {
  {
    auto e = open();
    save(*e);
  }
  {
    std::fstream f(segment(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(2 * kRecord + 4096 + 777));
    f.put('\x5a');
  }
  auto e = open();
  RestoreResult r = restore_checked(*e);
  EXPECT_EQ(r.tokens_restored, 512u);
  EXPECT_EQ(r.checksum_misses, 1u);
  EXPECT_EQ(r.recheck_kept, 0u);
  const Stats s = e->stats();
  EXPECT_EQ(s.recheck_dropped, 1u);
  EXPECT_EQ(s.recheck_kept, 0u);
  EXPECT_EQ(s.checksum_misses, 1u);
  EXPECT_EQ(e->lookup(tokens_).value(), 512u);
}

TEST_P(RecheckTest, VerifyRereadsBeforeItDrops) {
  auto e = open();
  save(*e);
  std::atomic<int> injected{0};
  {
    FaultScope faults = corrupt_chunk2_once(injected);
    auto report = e->verify();
    ASSERT_OK(report);
    EXPECT_EQ(report->corrupt_records, 0u);
  }
  ASSERT_EQ(injected.load(), 1);
  EXPECT_EQ(e->stats().recheck_kept, 1u);
  EXPECT_EQ(restore_checked(*e).tokens_restored, tokens_.size());
}

INSTANTIATE_TEST_SUITE_P(Paths, RecheckTest, ::testing::Values(IoPath::kDirect, IoPath::kBuffered),
                         [](const auto& info) { return std::string(io_path_name(info.param)); });

}  // namespace
}  // namespace kvtier
