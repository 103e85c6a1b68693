// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The engine end to end on real files: save, lookup, restore, persistence, tenants and ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::HostKv;

class EngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> open(const Options& o) {
    auto e = Engine::open(o);
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  std::unique_ptr<Engine> open() { return open(testing::small_options(dir_.str(), g_)); }

  SaveResult save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    auto r = e.save(tokens, kv.view);
    EXPECT_TRUE(testing::is_ok(r));
    return r.value_or(SaveResult{});
  }

  /// Restores and returns how many tokens came back byte-exact (asserting they all match).
  uint64_t restore_exact(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    auto r = e.restore(tokens, kv.view);
    EXPECT_TRUE(testing::is_ok(r));
    if (!r) return 0;
    const uint64_t n = r->tokens_restored;
    EXPECT_EQ(synthetic::first_mismatch(g_, tokens.first(n), kv.span(), tokens.size()), n);
    return n;
  }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
};

TEST_F(EngineTest, SaveThenRestoreIsByteExactFromOneTokenTo100K) {
  auto e = open();
  uint64_t seed = 100;
  for (uint64_t n : {1u, 2u, 255u, 256u, 257u, 1000u, 4096u, 100000u}) {
    auto tokens = synthetic::tokens(seed++, n);
    SaveResult s = save(*e, tokens);
    EXPECT_EQ(s.chunks_written, (n + 255) / 256) << n;
    EXPECT_EQ(restore_exact(*e, tokens), n) << n;
  }
}

TEST_F(EngineTest, RestoreReadsASessionAsFewLargeExtents) {
  auto e = open();
  auto tokens = synthetic::tokens(1, 10000);  // 10 MB in 16 MiB segments: at most 2 files
  save(*e, tokens);
  HostKv kv(g_, tokens.size());
  auto r = e->restore(tokens, kv.view);
  ASSERT_OK(r);
  EXPECT_LE(r->extents, 2u);
}

TEST_F(EngineTest, ReadExtentsAreTheFileRangesARestoreReads) {
  auto e = open();
  auto a = synthetic::tokens(11, 6000);
  auto b = synthetic::tokens(12, 3000);
  save(*e, a);
  save(*e, b);
  auto extents = e->read_extents(a);
  ASSERT_OK(extents);
  ASSERT_FALSE(extents->empty());
  uint64_t total = 0;
  for (const FileExtent& x : *extents) {
    EXPECT_EQ(x.offset % 4096, 0u);
    EXPECT_GT(x.length, 0u);
    EXPECT_EQ(std::filesystem::path(x.path).parent_path(), std::filesystem::path(e->store_dir()));
    EXPECT_LE(x.offset + x.length, std::filesystem::file_size(x.path));
    total += x.length;
  }
  auto ceiling = e->measure_read_ceiling(a);
  ASSERT_OK(ceiling);
  EXPECT_EQ(total, ceiling->bytes);
  auto half = e->read_extents(std::span<const Token>(a).first(3000));
  ASSERT_OK(half);
  uint64_t half_total = 0;
  for (const FileExtent& x : *half) half_total += x.length;
  EXPECT_LT(half_total, total);
  EXPECT_GT(half_total, 0u);
  // Zeroing the first extent's bytes (and nothing else) makes a's first chunk a miss, b untouched.
  {
    std::fstream f(extents->front().path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(extents->front().offset));
    std::vector<char> zeros(4096, 0);
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  ASSERT_OK(e->drop_page_cache());
  HostKv kv(g_, a.size());
  auto r = e->restore(a, kv.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, 0u);
  EXPECT_EQ(restore_exact(*e, b), b.size());
  ASSERT_OK(e->evict(b));
  auto gone = e->read_extents(b);
  ASSERT_OK(gone);
  EXPECT_TRUE(gone->empty());
}

TEST_F(EngineTest, LookupFindsTheLongestStoredPrefix) {
  auto e = open();
  auto stored = synthetic::tokens(7, 1000);  // chunks of 256: three full, one partial of 232
  save(*e, stored);
  EXPECT_EQ(*e->lookup(stored), 1000u);
  auto longer = stored;
  longer.resize(1500, 42);
  EXPECT_EQ(*e->lookup(longer), 1000u);  // the stored partial chunk is a prefix of this one
  auto diverge = stored;
  diverge[600] = -5;
  EXPECT_EQ(*e->lookup(diverge), 512u);
  EXPECT_EQ(*e->lookup(std::span(stored).first(900)), 768u);
  EXPECT_EQ(*e->lookup(synthetic::tokens(8, 1000)), 0u);
  EXPECT_EQ(restore_exact(*e, longer), 1000u);
}

TEST_F(EngineTest, ResavingAPrefixWritesOnlyTheNewChunks) {
  auto e = open();
  auto tokens = synthetic::tokens(3, 1024);
  save(*e, std::span(tokens).first(512));
  SaveResult s = save(*e, tokens);
  EXPECT_EQ(s.chunks_present, 2u);
  EXPECT_EQ(s.chunks_written, 2u);
  EXPECT_EQ(restore_exact(*e, tokens), 1024u);
}

TEST_F(EngineTest, TenantANeverHitsTenantB) {
  Options a = testing::small_options(dir_.str(), g_);
  a.tenant = "tenant-a";
  auto tokens = synthetic::tokens(11, 600);
  {
    auto e = open(a);
    save(*e, tokens);
    EXPECT_EQ(*e->lookup(tokens), 600u);
  }
  Options b = a;
  b.tenant = "tenant-b";
  auto e = open(b);
  EXPECT_EQ(*e->lookup(tokens), 0u);
  HostKv kv(g_, 600);
  EXPECT_EQ(e->restore(tokens, kv.view)->tokens_restored, 0u);
}

TEST_F(EngineTest, RankZeroNeverHitsRankOne) {
  Options r0 = testing::small_options(dir_.str(), testing::tiny_geometry(256, 0, 2));
  Options r1 = testing::small_options(dir_.str(), testing::tiny_geometry(256, 1, 2));
  auto e0 = open(r0);
  auto e1 = open(r1);  // both ranks' stores live side by side under one root
  ASSERT_NE(e0->store_dir(), e1->store_dir());
  auto tokens = synthetic::tokens(12, 700);
  HostKv kv(r0.geometry, tokens.size());
  synthetic::fill_kv(r0.geometry, tokens, kv.span(), tokens.size());
  ASSERT_OK(e0->save(tokens, kv.view));
  EXPECT_EQ(*e0->lookup(tokens), 700u);
  EXPECT_EQ(*e1->lookup(tokens), 0u);
}

TEST_F(EngineTest, StorePersistsAcrossReopen) {
  auto a = synthetic::tokens(21, 3000);
  auto b = synthetic::tokens(22, 777);
  {
    auto e = open();
    save(*e, a);
    save(*e, b);
  }
  auto e = open();
  EXPECT_EQ(e->stats().recovered_records, 12u + 4u);
  EXPECT_EQ(restore_exact(*e, a), 3000u);
  EXPECT_EQ(restore_exact(*e, b), 777u);
  save(*e, synthetic::tokens(23, 500));  // appends after what was recovered
  EXPECT_EQ(restore_exact(*e, a), 3000u);
}

TEST_F(EngineTest, EvictDropsTheSession) {
  auto e = open();
  auto tokens = synthetic::tokens(31, 1000);
  save(*e, tokens);
  auto dropped = e->evict(tokens);
  ASSERT_OK(dropped);
  EXPECT_EQ(*dropped, 4u);
  EXPECT_EQ(*e->lookup(tokens), 0u);
  EXPECT_EQ(e->stats().records, 0u);
}

TEST_F(EngineTest, BadArgumentsAreClearErrors) {
  auto e = open();
  HostKv kv(g_, 10);
  std::vector<Token> none;
  EXPECT_EQ(e->save(none, kv.view).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e->restore(none, kv.view).error().code(), ErrorCode::kInvalidArgument);
  auto tokens = synthetic::tokens(1, 20);
  EXPECT_EQ(e->save(tokens, kv.view).error().code(), ErrorCode::kInvalidArgument);  // room for 10
  ChunkedKv wrong = kv.view;
  wrong.memory.size -= 8;
  EXPECT_EQ(e->save(std::span(tokens).first(10), wrong).error().code(),
            ErrorCode::kInvalidArgument);
  // Host memory passed as CUDA memory: refused as unsupported without a GPU, as not device memory
  // with one; never dereferenced on the wrong side.
  ChunkedKv gpu = kv.view;
  gpu.memory.kind = MemoryKind::kCuda;
  const ErrorCode code = e->save(std::span(tokens).first(10), gpu).error().code();
  EXPECT_TRUE(code == ErrorCode::kNotSupported || code == ErrorCode::kInvalidArgument)
      << static_cast<int>(code);
  save(*e, tokens);
  EXPECT_EQ(e->restore(tokens, kv.view).error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(EngineTest, OpenRefusesAnotherGeometryAndMissingStores) {
  { auto e = open(); }
  Options other = testing::small_options(dir_.str(), testing::tiny_geometry(128));
  auto e = Engine::open(other);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kGeometryMismatch);
  EXPECT_NE(e.error().message().find("C256"), std::string::npos);
  Options missing = testing::small_options(dir_.str() + "/nowhere", g_);
  missing.create_if_missing = false;
  EXPECT_EQ(Engine::open(missing).error().code(), ErrorCode::kNotFound);
}

TEST_F(EngineTest, RootThatIsAFileIsAnError) {
  std::string file = dir_.str() + "/plain-file";
  { std::ofstream(file) << "x"; }
  auto e = Engine::open(testing::small_options(file, g_));
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message().find("not a directory"), std::string::npos)
      << e.error().to_string();
}

TEST_F(EngineTest, SecondEngineOnTheSameRankIsRefused) {
  auto first = open();
  auto second = Engine::open(testing::small_options(dir_.str(), g_));
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), ErrorCode::kLocked);
  EXPECT_NE(second.error().message().find("in use"), std::string::npos);
}

TEST_F(EngineTest, TwoRanksWithDramTiersRestoreConcurrently) {
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<KvGeometry> geometries = {testing::tiny_geometry(256, 0, 2),
                                        testing::tiny_geometry(256, 1, 2)};
  auto tokens = synthetic::tokens(70, 5000);
  for (const KvGeometry& g : geometries) {
    Options o = testing::small_options(dir_.str(), g);
    o.dram_bytes = 8 << 20;
    engines.push_back(open(o));
    HostKv kv(g, tokens.size());
    synthetic::fill_kv(g, tokens, kv.span(), tokens.size());
    ASSERT_OK(engines.back()->save(tokens, kv.view));
  }
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    std::atomic<int> exact{0};
    for (size_t i = 0; i < engines.size(); ++i) {
      threads.emplace_back([&, i] {
        HostKv out(geometries[i], tokens.size());
        auto r = engines[i]->restore(tokens, out.view);
        if (r && r->tokens_restored == tokens.size() &&
            synthetic::first_mismatch(geometries[i], tokens, out.span(), tokens.size()) ==
                tokens.size()) {
          ++exact;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(exact.load(), 2) << "round " << round;
  }
  EXPECT_GT(engines[0]->stats().dram_hits, 0u);
}

TEST_F(EngineTest, HostBytesAreAccountedPerPath) {
  auto tokens = synthetic::tokens(71, 3000);
  const uint64_t payload = g_.bytes_for_tokens(tokens.size());
  {
    auto e = open();
    save(*e, tokens);
  }
  // Host-memory targets: the CPU copy out of staging reads and writes every payload byte.
  struct Case {
    IoPath path;
    uint64_t dram_bytes;
    uint64_t read_factor;  // host traffic per byte read from the store files
  };
  for (const Case& c : {Case{IoPath::kDirect, 0, 1}, Case{IoPath::kBuffered, 0, 3},
                        Case{IoPath::kDirect, 8 << 20, 0}}) {
    Options o = testing::small_options(dir_.str(), g_);
    o.io_path = c.path;
    o.dram_bytes = c.dram_bytes;
    auto e = open(o);
    if (c.dram_bytes > 0) save(*e, tokens);  // saving a stored session again makes it hot
    HostKv out(g_, tokens.size());
    auto r = e->restore(tokens, out.view);
    ASSERT_OK(r);
    ASSERT_EQ(r->tokens_restored, tokens.size());
    EXPECT_EQ(synthetic::first_mismatch(g_, tokens, out.span(), tokens.size()), tokens.size());
    if (c.dram_bytes > 0) {
      EXPECT_EQ(r->bytes_read, 0u) << "every chunk should come from the DRAM tier";
      EXPECT_EQ(e->stats().dram_hits, (tokens.size() + 255) / 256);
    } else {
      EXPECT_GT(r->bytes_read, payload);  // headers and padding come along
    }
    EXPECT_EQ(r->host_bytes, c.read_factor * r->bytes_read + 2 * payload) << io_path_name(c.path);
    EXPECT_EQ(e->stats().restore_host_bytes, r->host_bytes);
  }
}

// A restore from the drives accounts its staging slots' time: some of it reading, and no more in
// the parts than the slots had.
TEST_F(EngineTest, ARestoreAccountsWhereItsStagingSlotsSpentTheirTime) {
  auto tokens = synthetic::tokens(73, 3000);
  auto e = open();
  save(*e, tokens);
  const Stats before = e->stats();
  HostKv out(g_, tokens.size());
  auto r = e->restore(tokens, out.view);
  ASSERT_OK(r);
  ASSERT_EQ(r->tokens_restored, tokens.size());
  const Stats s = e->stats();
  const uint64_t total = s.read_slot_ns - before.read_slot_ns;
  const uint64_t parts = (s.read_slot_reading_ns - before.read_slot_reading_ns) +
                         (s.read_slot_queued_ns - before.read_slot_queued_ns) +
                         (s.read_slot_consuming_ns - before.read_slot_consuming_ns) +
                         (s.read_slot_device_wait_ns - before.read_slot_device_wait_ns) +
                         (s.read_slot_refill_wait_ns - before.read_slot_refill_wait_ns);
  EXPECT_GT(s.read_slot_reading_ns, before.read_slot_reading_ns);
  EXPECT_GT(s.read_slot_consuming_ns, before.read_slot_consuming_ns);
  EXPECT_GT(total, 0u);
  EXPECT_LE(parts, total);
}

TEST_F(EngineTest, ResavingWithADifferentSourceNeverServesItFromDram) {
  auto tokens = synthetic::tokens(72, 1000);
  Options o = testing::small_options(dir_.str(), g_);
  {
    auto e = open(o);
    save(*e, tokens);
  }
  o.dram_bytes = 8 << 20;
  auto e = open(o);
  HostKv wrong(g_, tokens.size());  // zeros, not the stored KV
  ASSERT_OK(e->save(tokens, wrong.view));
  EXPECT_GT(e->stats().dram_records, 0u);
  EXPECT_EQ(restore_exact(*e, tokens), tokens.size());  // verified copies fail, disk serves
  EXPECT_EQ(e->stats().dram_hits, 0u);
}

TEST_F(EngineTest, ConcurrentSavesAndRestoresStayExact) {
  auto e = open();
  std::vector<std::thread> threads;
  std::atomic<int> exact{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto tokens = synthetic::tokens(1000 + t * 10 + i, 900 + i * 100);
        HostKv kv(g_, tokens.size());
        synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
        if (!e->save(tokens, kv.view)) continue;
        HostKv out(g_, tokens.size());
        auto r = e->restore(tokens, out.view);
        if (r && r->tokens_restored == tokens.size() &&
            synthetic::first_mismatch(g_, tokens, out.span(), tokens.size()) == tokens.size()) {
          ++exact;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(exact.load(), 20);
}

}  // namespace
}  // namespace kvtier
