// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// lookup() with a remote tier: the local prefix continued in the cluster, equal to what a restore
// then delivers; a local prefix ending in a partial chunk continued by the cluster's whole chunks;
// the cost of a 100K-token lookup against a real cluster on loopback.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "common/keys.hpp"
#include "engine/tiers/cluster_link.hpp"
#include "engine_remote_util.hpp"
#include "remote_test_util.hpp"

namespace kvtier {
namespace {

using testing::make_session;
using testing::node_options;
using testing::publish_from_node_a;
using testing::RedisCluster;
using testing::Session;
using testing::TempDir;
using testing::test_seed;
using testing::wait_for;
using Clock = std::chrono::steady_clock;

/// Node B's lookup, then its restore into a destination poisoned first: the restore must deliver
/// exactly what the lookup said, byte-exact.
void expect_lookup_equals_restore(Engine& b, const KvGeometry& g, const Session& s, uint64_t want) {
  const uint64_t n = s.tokens.size();
  auto looked = b.lookup(s.tokens);
  ASSERT_OK(looked);
  testing::HostKv out(g, n);
  std::memset(out.data.get(), 0xa5, out.bytes);
  auto restored = b.restore(s.tokens, out.view);
  ASSERT_OK(restored);
  EXPECT_EQ(*looked, want) << b.stats().remote;
  EXPECT_EQ(restored->tokens_restored, want) << restored->problem << " / " << b.stats().remote;
  const uint64_t got = restored->tokens_restored;
  EXPECT_EQ(synthetic::first_mismatch(g, std::span(s.tokens).first(got), out.span(), n), got);
}

// Node B saved a shorter session than node A (its last record a partial chunk); the cluster holds
// A's whole chain. The restore must go on from the cluster's whole chunk where B's partial one
// lies, never leave a gap of rows it counts as restored (before: 972 of 1,000 "restored" with
// tokens 100-127 never written, and a lookup of 100).
TEST(EngineRemote, LocalPartialChunkIsContinuedByTheClustersWholeChunks) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const KvGeometry g = testing::tiny_geometry(64);
  struct Case {
    uint64_t session, local, want;  // tokens of A's session, B's local prefix, restored
    bool hole_after_partial;        // the cluster lacks the chunk of B's partial record
  };
  const Case cases[] = {
      {1000, 100, 1000, false},  // partial in the middle: the cluster's chain carries on
      {100, 84, 100, false},     // partial in the last chunk, shorter than the request's
      {1000, 100, 100, true},    // the cluster cannot continue: B's partial record still counts
  };
  uint64_t seed = test_seed();
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "session " << c.session << " local " << c.local);
    const Session s = make_session(g, ++seed, c.session);
    publish_from_node_a(**cluster, g, s);
    if (c.hole_after_partial) {
      const auto keys = chain_keys(namespace_key(g, ""), s.tokens, g.chunk_tokens);
      const auto del =
          (*cluster)->cli((*cluster)->ports()[0], {"-c", "del", remote_key(keys[c.local / 64])});
      ASSERT_EQ(del.exit_code, 0) << del.output;
    }
    TempDir dir_b;
    Options ob = node_options(dir_b, g, "");  // B's own prefix only in its store
    {
      auto b = Engine::open(ob);
      ASSERT_OK(b);
      ASSERT_OK((*b)->save(std::span(s.tokens).first(c.local), s.kv->view));
    }
    ob.remote.seeds = (*cluster)->seeds();
    auto b = Engine::open(ob);
    ASSERT_OK(b);
    expect_lookup_equals_restore(**b, g, s, c.want);
  }
}

// Drawn chunk sizes, session lengths, local prefixes (none, whole chunks, a partial chunk, all),
// and a hole drawn in the cluster's chain (a deleted key or a truncated value) or none: node B's
// lookup says exactly what its restore then delivers, byte-exact.
TEST(EngineRemote, LookupSaysWhatTheRestoreThenDelivers) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  auto client = remote::ClusterClient::create(remote::testing::config_for(**cluster));
  ASSERT_OK(client);
  std::mt19937_64 rng(test_seed());
  const uint32_t chunks[] = {16, 64, 256};
  for (int round = 0; round < 10; ++round) {
    const uint32_t chunk = chunks[rng() % std::size(chunks)];
    const KvGeometry g = testing::tiny_geometry(chunk);
    const uint64_t n = 1 + rng() % 5000;
    const uint64_t records = (n + chunk - 1) / chunk;
    const uint64_t local = rng() % 3 == 0 ? 0 : 1 + rng() % n;
    const int hole_kind = static_cast<int>(rng() % 3);  // none, deleted, truncated
    const uint64_t hole = rng() % records;
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk << " tokens " << n << " local " << local
                                      << " hole kind " << hole_kind << " at " << hole);
    const Session s = make_session(g, rng(), n);
    publish_from_node_a(**cluster, g, s);
    const auto keys = chain_keys(namespace_key(g, ""), s.tokens, chunk);
    if (hole_kind != 0) {
      const std::string name = remote_key(keys[hole]);
      if (hole_kind == 1) {
        const auto del = (*cluster)->cli((*cluster)->ports()[0], {"-c", "del", name});
        ASSERT_EQ(del.exit_code, 0) << del.output;
      } else {
        const std::string cut(100, 'x');
        const std::span<const std::byte> bytes = std::as_bytes(std::span(cut));
        ASSERT_EQ(remote::testing::tally((*client)->set(std::span(&name, 1), std::span(&bytes, 1),
                                                        std::chrono::milliseconds(0)))
                      .done,
                  1u);
      }
    }
    TempDir dir_b;
    Options ob = node_options(dir_b, g, "");
    if (local > 0) {
      auto b = Engine::open(ob);
      ASSERT_OK(b);
      ASSERT_OK((*b)->save(std::span(s.tokens).first(local), s.kv->view));
    }
    // B's local prefix, continued by the cluster from the chunk after it, or from the chunk of
    // its last record when that is a partial chunk short of the request's; up to the hole.
    const bool partial = local % chunk != 0 && local < n;
    const uint64_t from = partial ? local / chunk : (local + chunk - 1) / chunk;
    const bool hole_ahead = hole_kind != 0 && hole >= from;
    const uint64_t run = (hole_ahead ? hole : records) - std::min(from, records);
    const uint64_t want = run > 0 ? std::min(n, (from + run) * chunk) : local;
    ob.remote.seeds = (*cluster)->seeds();
    auto b = Engine::open(ob);
    ASSERT_OK(b);
    expect_lookup_equals_restore(**b, g, s, want);
  }
  // The cluster gone: lookups answer from the local store, quickly.
  const KvGeometry g = testing::tiny_geometry(64);
  const Session s = make_session(g, rng(), 640);
  publish_from_node_a(**cluster, g, s);
  TempDir dir_b;
  auto b = Engine::open(node_options(dir_b, g, (*cluster)->seeds()));
  ASSERT_OK(b);
  ASSERT_OK((*b)->save(std::span(s.tokens).first(128), s.kv->view));
  EXPECT_EQ(*(*b)->lookup(s.tokens), 640u);
  cluster->reset();
  const auto start = Clock::now();
  auto alone = (*b)->lookup(s.tokens);
  ASSERT_OK(alone);
  EXPECT_EQ(*alone, 128u);
  const auto outage = Clock::now() - start;
  std::printf("lookup with the cluster gone: %.1f ms\n",
              std::chrono::duration<double, std::milli>(outage).count());
  EXPECT_LT(outage, std::chrono::seconds(3));
  // A scheduler looks up every request: while the cluster is down each lookup may cost a round
  // or two of a failed connect, not the client's whole retry schedule (~0.6 s each before).
  for (int i = 0; i < 3; ++i) {
    const auto again = Clock::now();
    EXPECT_EQ(*(*b)->lookup(s.tokens), 128u);
    const auto took = Clock::now() - again;
    std::printf("lookup with the cluster gone, again: %.1f ms\n",
                std::chrono::duration<double, std::milli>(took).count());
    EXPECT_LT(took, std::chrono::milliseconds(300));
  }
}

// The cost of a scheduler's lookup of a 100K-token prompt (391 chunks of 256) on a node whose
// store holds none of it, or half, against a 3+3 cluster on loopback; printed for
// docs/reliability.md, checked loosely (the box is shared with builds).
TEST(EngineRemote, LookupOfA100KTokenPromptIsCheap) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const KvGeometry g = testing::tiny_geometry(256);
  const uint64_t n = 100000;
  const Session s = make_session(g, test_seed(), n);
  publish_from_node_a(**cluster, g, s);
  TempDir dir_b;
  Options ob = node_options(dir_b, g, (*cluster)->seeds());
  auto measure = [&](Engine& b, const char* what) {
    std::vector<double> ms;
    for (int i = 0; i < 200; ++i) {
      const auto start = Clock::now();
      auto hit = b.lookup(s.tokens);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      ASSERT_OK(hit);
      ASSERT_EQ(*hit, n);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("lookup of %llu tokens (%llu chunks), %s: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(n / 256 + 1),
                what, ms[ms.size() / 2], ms[ms.size() * 99 / 100], ms.back());
    EXPECT_LT(ms[ms.size() / 2], 50.0);
  };
  {
    auto b = Engine::open(ob);
    ASSERT_OK(b);
    measure(**b, "none local, all 391 in the cluster");
  }
  ob.remote.seeds = "";
  {
    auto b = Engine::open(ob);
    ASSERT_OK(b);
    ASSERT_OK((*b)->save(std::span(s.tokens).first(n / 2), s.kv->view));
  }
  ob.remote.seeds = (*cluster)->seeds();
  auto b = Engine::open(ob);
  ASSERT_OK(b);
  measure(**b, "half local, the rest in the cluster");
}

}  // namespace
}  // namespace kvtier
