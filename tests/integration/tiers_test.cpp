// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The local tiers behind one interface (src/engine/tiers/), without a cluster: one restore served
// by the DRAM tier and the drives, every byte compared over seeded shapes; the tiers are asked in
// order (a chunk the DRAM tier serves is never read from the drives); a corrupt drive copy is a
// miss, never wrong bytes. tests/remote/engine_tiers_test.cpp adds the cluster.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "store/record_format.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::HostKv;
using testing::TempDir;
using testing::test_seed;

/// A session saved by an engine whose DRAM tier holds its first `in_dram` chunks (one save
/// reserves every slab at once, so the later records find none free).
struct LocalTiers {
  KvGeometry g;
  uint64_t tokens = 0;
  uint64_t chunks = 0;
  uint64_t in_dram = 0;
  TempDir dir;
  std::unique_ptr<Engine> e;
  std::vector<Token> session;

  void open(std::mt19937_64& rng) {
    const uint32_t chunk = std::uniform_int_distribution<uint32_t>(0, 1)(rng) != 0 ? 128 : 64;
    g = testing::tiny_geometry(chunk);
    tokens = std::uniform_int_distribution<uint64_t>(3 * chunk + 1, 16 * chunk)(rng);
    chunks = (tokens + chunk - 1) / chunk;
    in_dram = std::uniform_int_distribution<uint64_t>(1, chunks - 2)(rng);
    Options o = testing::small_options(dir.str(), g);
    // A slab holds one record image (header block, then payload), page-aligned; less than one
    // more is left over (Options asks for room past one slab).
    const uint64_t slab = align_up(kBlock + g.bytes_for_tokens(chunk));
    o.dram_bytes = (in_dram + 1) * slab - 1;
    auto opened = Engine::open(o);
    ASSERT_OK(opened);
    e = std::move(*opened);
    session = synthetic::tokens(rng(), tokens);
    ASSERT_OK(testing::save_synthetic(*e, g, session));
    ASSERT_EQ(e->stats().dram_records, in_dram);
  }

  /// Flips one payload byte of chunk `c` in its segment file.
  void damage_on_drives(uint64_t c) {
    auto extents = e->read_extents(session);
    ASSERT_OK(extents);
    ASSERT_EQ(extents->size(), 1u);  // one session in one segment: records back to back
    const uint64_t record = kBlock + align_up(g.bytes_for_tokens(g.chunk_tokens));
    std::fstream f((*extents)[0].path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.is_open());
    const auto at = static_cast<std::streamoff>((*extents)[0].offset + c * record + kBlock + 777);
    f.seekg(at);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x5a);
    f.seekp(at);
    f.write(&byte, 1);
  }
};

TEST(LocalTiers, OneRestoreServedByDramAndDrivesIsByteExactForSeededShapes) {
  std::mt19937_64 rng(test_seed());
  for (int round = 0; round < 4; ++round) {
    LocalTiers t;
    t.open(rng);
    if (::testing::Test::HasFatalFailure()) return;
    SCOPED_TRACE(::testing::Message() << "round " << round << ": " << t.tokens << " tokens, chunk "
                                      << t.g.chunk_tokens << ", " << t.in_dram << " in DRAM");
    HostKv out(t.g, t.tokens);
    auto r = t.e->restore(t.session, out.view);
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, t.tokens) << r->problem;
    EXPECT_EQ(synthetic::first_mismatch(t.g, t.session, out.span(), t.tokens), t.tokens);
    EXPECT_EQ(t.e->stats().dram_hits, t.in_dram);
    EXPECT_EQ(t.e->stats().store_hits, t.chunks - t.in_dram);
  }
}

TEST(LocalTiers, AChunkTheDramTierServesIsNeverReadFromTheDrives) {
  std::mt19937_64 rng(test_seed() ^ 0xd7a3);
  LocalTiers t;
  t.open(rng);
  if (::testing::Test::HasFatalFailure()) return;
  const uint64_t c = std::uniform_int_distribution<uint64_t>(0, t.in_dram - 1)(rng);
  t.damage_on_drives(c);
  if (::testing::Test::HasFatalFailure()) return;
  HostKv out(t.g, t.tokens);
  auto r = t.e->restore(t.session, out.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, t.tokens) << r->problem;
  EXPECT_EQ(synthetic::first_mismatch(t.g, t.session, out.span(), t.tokens), t.tokens);
  EXPECT_EQ(r->checksum_misses, 0u);
  EXPECT_EQ(t.e->stats().dram_hits, t.in_dram);
}

TEST(LocalTiers, ACorruptDriveCopyIsAMissNeverWrongBytes) {
  std::mt19937_64 rng(test_seed() ^ 0xbad);
  LocalTiers t;
  t.open(rng);
  if (::testing::Test::HasFatalFailure()) return;
  const uint64_t c = std::uniform_int_distribution<uint64_t>(t.in_dram, t.chunks - 1)(rng);
  SCOPED_TRACE(::testing::Message()
               << t.chunks << " chunks, " << t.in_dram << " in DRAM, chunk " << c << " damaged");
  t.damage_on_drives(c);
  if (::testing::Test::HasFatalFailure()) return;
  HostKv out(t.g, t.tokens);
  auto r = t.e->restore(t.session, out.view);
  ASSERT_OK(r);
  const uint64_t intact = c * t.g.chunk_tokens;
  EXPECT_EQ(r->tokens_restored, intact);
  EXPECT_EQ(
      synthetic::first_mismatch(t.g, std::span(t.session).first(intact), out.span(), t.tokens),
      intact);
  EXPECT_EQ(r->checksum_misses, 1u);
  EXPECT_EQ(t.e->stats().records, t.chunks - 1);
}

}  // namespace
}  // namespace kvtier
