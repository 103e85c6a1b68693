// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The tiers behind one interface (src/engine/tiers/): one restore served by the DRAM tier, the
// local drives and a real Redis Cluster at once, every byte compared; a copy that is corrupt in one
// tier is a miss there, served by the tier behind it, never wrong bytes.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/keys.hpp"
#include "engine/tiers/cluster_link.hpp"
#include "engine_remote_util.hpp"
#include "remote_test_util.hpp"
#include "store/record_format.hpp"

namespace kvtier {
namespace {

using kvtier::testing::RedisCluster;
using kvtier::testing::TempDir;
using kvtier::testing::test_seed;
using testing::make_session;
using testing::node_options;
using testing::Session;
using testing::wait_for;

/// A shape of one case: the geometry, the session's tokens (a partial last chunk most of the
/// time), the chunks node B holds on its drives and, of those, the first ones its DRAM tier holds.
struct Shape {
  KvGeometry g;
  uint64_t tokens = 0;
  uint64_t chunks = 0;
  uint64_t on_drives = 0;
  uint64_t in_dram = 0;
};

Shape shape_for(std::mt19937_64& rng) {
  Shape s;
  const uint32_t chunk = std::uniform_int_distribution<uint32_t>(0, 1)(rng) != 0 ? 128 : 64;
  const uint32_t world = std::uniform_int_distribution<uint32_t>(1, 2)(rng);
  s.g = testing::tiny_geometry(chunk, world - 1, world);
  s.tokens = std::uniform_int_distribution<uint64_t>(4 * chunk + 1, 12 * chunk)(rng);
  s.chunks = (s.tokens + chunk - 1) / chunk;
  s.on_drives = std::uniform_int_distribution<uint64_t>(2, s.chunks - 1)(rng);
  s.in_dram = std::uniform_int_distribution<uint64_t>(1, s.on_drives - 1)(rng);
  return s;
}

/// DRAM for exactly `records` of `g`'s whole chunks: a slab holds one record image (its header
/// block, then its payload), page-aligned; less than one more slab is left over (Options asks
/// for room past one slab).
uint64_t dram_for(const KvGeometry& g, uint64_t records) {
  const uint64_t slab = align_up(kBlock + g.bytes_for_tokens(g.chunk_tokens));
  return (records + 1) * slab - 1;
}

/// Node A saves the whole session (written behind to the cluster); node B saves its first
/// `on_drives` chunks, of which its DRAM tier keeps the first `in_dram` (every slab is reserved
/// at once by one save, so the later records find none free).
struct TwoNodes {
  std::unique_ptr<RedisCluster> cluster;
  TempDir dir_a, dir_b;
  std::unique_ptr<Engine> a, b;
  Session s;

  void start(const Shape& shape, uint64_t seed, uint64_t b_saves) {
    auto c = RedisCluster::start({});
    ASSERT_OK(c);
    cluster = std::move(*c);
    auto ea = Engine::open(node_options(dir_a, shape.g, cluster->seeds()));
    ASSERT_OK(ea);
    a = std::move(*ea);
    s = make_session(shape.g, seed, shape.tokens);
    auto saved = a->save(s.tokens, s.kv->view);
    ASSERT_OK(saved);
    ASSERT_TRUE(wait_for(*a, &Stats::remote_writes, shape.chunks)) << a->stats().remote;
    Options ob = node_options(dir_b, shape.g, cluster->seeds());
    ob.dram_bytes = dram_for(shape.g, shape.in_dram);
    auto eb = Engine::open(ob);
    ASSERT_OK(eb);
    b = std::move(*eb);
    ASSERT_OK(b->save(std::span(s.tokens).first(b_saves), s.kv->view));
    ASSERT_EQ(b->stats().dram_records, shape.in_dram);
  }
};

TEST(Tiers, OneRestoreServedByDramDrivesAndClusterIsByteExactForSeededShapes) {
  std::mt19937_64 rng(test_seed());
  for (int round = 0; round < 3; ++round) {
    const Shape shape = shape_for(rng);
    SCOPED_TRACE(::testing::Message()
                 << "round " << round << ": " << shape.tokens << " tokens, chunk "
                 << shape.g.chunk_tokens << ", rank of " << shape.g.tp_world << ", "
                 << shape.on_drives << " chunks on B's drives, " << shape.in_dram << " in DRAM");
    TwoNodes nodes;
    nodes.start(shape, test_seed() + round, shape.on_drives * shape.g.chunk_tokens);
    if (::testing::Test::HasFatalFailure()) return;
    testing::HostKv out(shape.g, shape.tokens);
    auto r = nodes.b->restore(nodes.s.tokens, out.view);
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, shape.tokens) << r->problem;
    EXPECT_EQ(synthetic::first_mismatch(shape.g, nodes.s.tokens, out.span(), shape.tokens),
              shape.tokens);
    const Stats st = nodes.b->stats();
    EXPECT_EQ(st.dram_hits, shape.in_dram);
    EXPECT_EQ(st.store_hits, shape.on_drives - shape.in_dram);
    EXPECT_EQ(st.remote_hits, shape.chunks - shape.on_drives);
    EXPECT_EQ(st.remote_rejected, 0u);
    EXPECT_EQ(r->checksum_misses, 0u);
    // The cluster's records moved on into B's drives, through the write route.
    ASSERT_TRUE(wait_for(*nodes.b, &Stats::remote_promoted, shape.chunks - shape.on_drives));
    EXPECT_EQ(nodes.b->stats().records, shape.chunks);
  }
}

TEST(Tiers, ACopyCorruptOnTheDrivesIsAMissThereAndTheClusterServesItsChunk) {
  std::mt19937_64 rng(test_seed() ^ 0x5eed);
  const Shape shape = shape_for(rng);
  TwoNodes nodes;
  nodes.start(shape, test_seed(), shape.tokens);  // B holds every chunk on its drives
  if (::testing::Test::HasFatalFailure()) return;
  // One of the chunks only the drives hold (past the DRAM tier's), damaged in its segment file.
  const uint64_t bad =
      std::uniform_int_distribution<uint64_t>(shape.in_dram, shape.chunks - 2)(rng);
  SCOPED_TRACE(::testing::Message() << shape.tokens << " tokens, chunk " << shape.g.chunk_tokens
                                    << ", chunk " << bad << " damaged");
  auto extents = nodes.b->read_extents(nodes.s.tokens);
  ASSERT_OK(extents);
  ASSERT_EQ(extents->size(), 1u);  // one session in one segment: records back to back
  const uint64_t record = kBlock + align_up(shape.g.bytes_for_tokens(shape.g.chunk_tokens));
  {
    std::fstream f((*extents)[0].path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.is_open());
    const auto at = static_cast<std::streamoff>((*extents)[0].offset + bad * record + kBlock + 777);
    f.seekg(at);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x5a);
    f.seekp(at);
    f.write(&byte, 1);
  }
  testing::HostKv out(shape.g, shape.tokens);
  auto r = nodes.b->restore(nodes.s.tokens, out.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, shape.tokens) << r->problem;
  EXPECT_EQ(synthetic::first_mismatch(shape.g, nodes.s.tokens, out.span(), shape.tokens),
            shape.tokens);
  EXPECT_EQ(r->checksum_misses, 1u);  // re-read, failed again, dropped from B's drives
  const Stats st = nodes.b->stats();
  EXPECT_EQ(st.dram_hits, shape.in_dram);
  EXPECT_EQ(st.store_hits, bad - shape.in_dram);
  EXPECT_EQ(st.remote_hits, shape.chunks - bad);
  // The cluster's copy of the damaged chunk moved back into B's drives (the others are there).
  ASSERT_TRUE(wait_for(*nodes.b, &Stats::remote_promoted, shape.chunks - bad));
  EXPECT_EQ(nodes.b->stats().records, shape.chunks);
}

// The header check is one for every tier: a value that is a whole, intact record of this session,
// but of another chunk, under this chunk's key passes its payload checksum and fails only the
// header's key. It is a miss, never that chunk's bytes in this one's place.
TEST(Tiers, AClusterValueOfAnotherChunkUnderThisKeyIsAMissNeverItsBytes) {
  std::mt19937_64 rng(test_seed() ^ 0x4ead);
  const KvGeometry g = testing::tiny_geometry(64);
  const uint64_t chunks = std::uniform_int_distribution<uint64_t>(4, 10)(rng);
  const uint64_t n = chunks * 64;
  const uint64_t swapped = std::uniform_int_distribution<uint64_t>(1, chunks - 2)(rng);
  SCOPED_TRACE(::testing::Message() << chunks << " chunks, chunk " << swapped << " replaced");
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  TempDir dir_a, dir_b;
  auto a = Engine::open(node_options(dir_a, g, (*cluster)->seeds()));
  ASSERT_OK(a);
  const Session s = make_session(g, test_seed(), n);
  ASSERT_OK((*a)->save(s.tokens, s.kv->view));
  ASSERT_TRUE(wait_for(**a, &Stats::remote_writes, chunks));
  const std::vector<Key128> keys = chain_keys(namespace_key(g, ""), s.tokens, g.chunk_tokens);
  const std::string from = remote_key(keys[swapped + 1]);
  const std::string to = remote_key(keys[swapped]);
  // DUMP/RESTORE would need both keys on one node: copy the value through this process.
  auto client = remote::ClusterClient::create(remote::testing::config_for(**cluster));
  ASSERT_OK(client);
  std::string value;
  ASSERT_EQ(remote::testing::tally(
                (*client)->get(std::span(&from, 1),
                               [&](size_t, std::span<const std::byte> v) {
                                 value.assign(reinterpret_cast<const char*>(v.data()), v.size());
                               }))
                .done,
            1u);
  const std::string_view view = value;
  const std::span<const std::byte> bytes = std::as_bytes(std::span(view));
  ASSERT_EQ(
      remote::testing::tally((*client)->set(std::span(&to, 1), std::span(&bytes, 1), {})).done, 1u);
  auto b = Engine::open(node_options(dir_b, g, (*cluster)->seeds()));
  ASSERT_OK(b);
  testing::HostKv out(g, n);
  auto r = (*b)->restore(s.tokens, out.view);
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, swapped * 64);
  EXPECT_EQ(synthetic::first_mismatch(g, std::span(s.tokens).first(swapped * 64), out.span(), n),
            swapped * 64);
  EXPECT_EQ((*b)->stats().remote_hits, swapped);
  EXPECT_EQ((*b)->stats().remote_rejected, 1u);
}

}  // namespace
}  // namespace kvtier
