// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Coded records in a real cluster: what node A stores coded and raw (a session of both) node B
// restores from the cluster byte-exact, several records to a fetch batch; a value cut short is
// not counted by a lookup, which says what the restore then delivers.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "compressible_kv.hpp"
#include "engine_remote_util.hpp"
#include "kvtier/kvtier.hpp"
#include "tp_reference.hpp"

namespace kvtier {
namespace {

using testing::RedisCluster;
using testing::TempDir;
using testing::TpModel;
using testing::wait_for;

Options coded_node(const TempDir& dir, const KvGeometry& g, const std::string& seeds,
                   Compression compression) {
  Options o = testing::tp_free_options(dir.str(), g, 1, 1ull << 30);
  o.segment_bytes = 16 << 20;
  o.staging_bytes = 16 << 20;  // several records to a fetch batch, as a production staging has
  o.compression = compression;
  o.remote.seeds = seeds;
  return o;
}

struct Saved {
  std::vector<Token> tokens;
  std::vector<std::byte> kv;
};

/// Node A saves a session of `m` (chunks `random_chunks` random: stored raw) and waits until the
/// cluster holds every record.
Saved publish(const RedisCluster& cluster, const TpModel& m, Compression compression,
              const std::vector<uint64_t>& random_chunks, std::mt19937_64& rng) {
  Saved s;
  s.tokens.resize(m.tokens);
  for (auto& t : s.tokens) t = static_cast<Token>(rng() % 50000);
  s.kv = testing::bf16_kv(m, rng, random_chunks);
  TempDir dir;
  auto a = Engine::open(coded_node(dir, m.rank(0, 1), cluster.seeds(), compression));
  EXPECT_TRUE(a) << a.error().message();
  if (!a) return s;
  std::vector<std::byte> kv = s.kv;
  auto saved = (*a)->save(s.tokens, testing::host_kv(kv, m.tokens));
  EXPECT_TRUE(saved) << saved.error().message();
  if (!saved) return s;
  EXPECT_TRUE(wait_for(**a, &Stats::remote_writes, saved->chunks_written)) << (*a)->stats().remote;
  return s;
}

TEST(EngineRemoteCoded, ANodeRestoresAnotherNodesCodedAndRawRecordsFromTheCluster) {
  auto cluster = RedisCluster::start({});
  ASSERT_TRUE(cluster) << cluster.error().message();
  std::mt19937_64 rng(testing::test_seed());
  const TpModel m{
      .heads = 1, .layers = 2, .head_dim = 128, .chunk = 64, .max_tp = 1, .tokens = 300};
  const Saved s = publish(**cluster, m, Compression::kSplit16, {1 + rng() % 3}, rng);
  TempDir db;
  auto b = Engine::open(coded_node(db, m.rank(0, 1), (*cluster)->seeds(), Compression::kOff));
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(*(*b)->lookup(s.tokens), m.tokens);
  std::vector<std::byte> got(s.kv.size(), std::byte{0xEE});
  auto r = (*b)->restore(s.tokens, testing::host_kv(got, m.tokens));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->tokens_restored, m.tokens) << r->problem << " / " << (*b)->stats().remote;
  EXPECT_TRUE(got == s.kv);
  EXPECT_EQ((*b)->stats().remote_hits, 5u);
}

TEST(EngineRemoteCoded, ALookupDoesNotCountAValueCutShort) {
  auto cluster = RedisCluster::start({});
  ASSERT_TRUE(cluster) << cluster.error().message();
  std::mt19937_64 rng(testing::test_seed());
  const TpModel m{
      .heads = 1, .layers = 2, .head_dim = 128, .chunk = 64, .max_tp = 1, .tokens = 300};
  for (Compression c : {Compression::kOff, Compression::kSplit16}) {
    SCOPED_TRACE(compression_name(c));
    ASSERT_TRUE(testing::flush_cluster(**cluster).ok());
    const Saved s = publish(**cluster, m, c, {}, rng);
    TempDir db;
    auto b = Engine::open(coded_node(db, m.rank(0, 1), (*cluster)->seeds(), c));
    ASSERT_TRUE(b) << b.error().message();
    auto keys = (*b)->remote_keys(s.tokens);
    ASSERT_TRUE(keys) << keys.error().message();
    // Chunk 2's value cut to its header and 1,000 bytes (a coded payload keeps more than half).
    const testing::ToolRun cut =
        (*cluster)->cli((*cluster)->ports()[0],
                        {"-c", "eval",
                         "local v = redis.call('get', KEYS[1]); return redis.call('set', KEYS[1], "
                         "string.sub(v, 1, 4096 + 1000))",
                         "1", (*keys)[2].key});
    ASSERT_EQ(cut.exit_code, 0) << cut.output;
    const uint64_t looked = *(*b)->lookup(s.tokens);
    std::vector<std::byte> got(s.kv.size(), std::byte{0xEE});
    auto r = (*b)->restore(s.tokens, testing::host_kv(got, m.tokens));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(looked, 2 * m.chunk);
    EXPECT_EQ(r->tokens_restored, looked) << r->problem;
  }
}

}  // namespace
}  // namespace kvtier
