// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::wait_remote and Engine::sync_remote against a real cluster: what the write-behind queue
// dropped, what was saved before the remote tier was given, and what the cluster lost all reach it
// again, and another node restores them byte-exact.
#include <gtest/gtest.h>

#include "common/keys.hpp"
#include "engine/tiers/cluster_link.hpp"
#include "engine_remote_util.hpp"
#include "remote_test_util.hpp"

namespace kvtier {
namespace {

using testing::cluster_keys;
using testing::flush_cluster;
using testing::make_session;
using testing::node_options;
using testing::RedisCluster;
using testing::Session;
using testing::TempDir;
using testing::test_seed;

void expect_node_b_restores(const RedisCluster& cluster, const KvGeometry& g,
                            const std::vector<Session>& sessions) {
  TempDir dir_b;
  auto b = Engine::open(node_options(dir_b, g, cluster.seeds()));
  ASSERT_OK(b);
  for (const Session& s : sessions) {
    const uint64_t n = s.tokens.size();
    testing::HostKv out(g, n);
    auto r = (*b)->restore(s.tokens, out.view);
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, n) << r->problem << " / " << (*b)->stats().remote;
    EXPECT_EQ(synthetic::first_mismatch(g, s.tokens, out.span(), n), n);
  }
}

// The cluster's masters paused (CLIENT PAUSE) while 4 saves of 25 records each go to a
// write-behind queue of 60: the first two are queued, the last two dropped. wait_remote() returns
// once the queue is written (without it the counts read while the cluster is paused fall short),
// the counts are then final (written + dropped = saved, the cluster holds exactly the written
// ones), and sync_remote() publishes the dropped ones.
TEST(EngineRemote, WaitRemoteMakesTheCountsFinalAndSyncPublishesWhatWasDropped) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const KvGeometry g = testing::tiny_geometry(16);
  TempDir dir;
  Options o = node_options(dir, g, (*cluster)->seeds());
  o.remote.queue_records = 60;
  o.remote.command_timeout_ms = 10000;  // longer than the pause: the writes wait, never fail
  auto a = Engine::open(o);
  ASSERT_OK(a);
  auto nodes = (*cluster)->nodes();
  ASSERT_OK(nodes);
  for (const auto& node : *nodes) {
    if (!node.master) continue;
    const auto paused = (*cluster)->cli(node.port, {"client", "pause", "3000"});
    ASSERT_EQ(paused.exit_code, 0) << paused.output;
  }
  std::vector<Session> sessions;
  uint64_t saved = 0;
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(make_session(g, test_seed() + i, 400));
    auto r = (*a)->save(sessions.back().tokens, sessions.back().kv->view);
    ASSERT_OK(r);
    saved += r->chunks_written;
  }
  (*a)->wait_remote();
  const Stats s = (*a)->stats();
  EXPECT_EQ(s.remote_pending, 0u);
  EXPECT_EQ(s.remote_writes + s.remote_write_drops, saved);
  EXPECT_EQ(s.remote_write_errors, 0u) << s.remote;
  EXPECT_GT(s.remote_writes, 0u);
  EXPECT_GT(s.remote_write_drops, 0u);
  auto held = cluster_keys(**cluster);
  ASSERT_OK(held);
  EXPECT_EQ(*held, s.remote_writes);

  // One session's records only, then all of them.
  auto one = (*a)->sync_remote(sessions[0].tokens);
  ASSERT_OK(one);
  EXPECT_EQ(one->records, 25u);
  EXPECT_EQ(one->already_present + one->published, 25u);
  EXPECT_EQ(one->failed, 0u) << one->problem;
  auto all = (*a)->sync_remote();
  ASSERT_OK(all);
  EXPECT_EQ(all->records, saved);
  EXPECT_EQ(all->published + one->published, s.remote_write_drops);
  EXPECT_EQ(all->already_present + all->published, saved);
  held = cluster_keys(**cluster);
  ASSERT_OK(held);
  EXPECT_EQ(*held, saved);
  expect_node_b_restores(**cluster, g, sessions);
}

// Saved before the remote tier was given; then the cluster flushed; then a value replaced by a
// truncated one: each time sync sends exactly what the cluster lacks or holds wrong, and node B
// restores every session byte-exact from the cluster.
TEST(EngineRemote, SyncRefillsAClusterThatNeverHadOrLostTheRecords) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const KvGeometry g = testing::tiny_geometry(64);
  TempDir dir;
  std::vector<Session> sessions;
  uint64_t records = 0;
  {
    auto local = Engine::open(node_options(dir, g, ""));
    ASSERT_OK(local);
    for (int i = 0; i < 3; ++i) {
      sessions.push_back(make_session(g, test_seed() + 10 + i, 500 + 300 * i));
      auto r = (*local)->save(sessions.back().tokens, sessions.back().kv->view);
      ASSERT_OK(r);
      records += r->chunks_written;
    }
    auto refused = (*local)->sync_remote();
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  }
  auto a = Engine::open(node_options(dir, g, (*cluster)->seeds()));
  ASSERT_OK(a);
  auto expect_sync = [&](uint64_t present, uint64_t published) {
    auto r = (*a)->sync_remote();
    ASSERT_OK(r);
    EXPECT_EQ(r->records, records);
    EXPECT_EQ(r->already_present, present);
    EXPECT_EQ(r->published, published);
    EXPECT_EQ(r->failed, 0u) << r->problem;
    auto held = cluster_keys(**cluster);
    ASSERT_OK(held);
    EXPECT_EQ(*held, records);
  };
  expect_sync(0, records);
  expect_node_b_restores(**cluster, g, sessions);
  expect_sync(records, 0);

  ASSERT_OK(flush_cluster(**cluster));
  expect_sync(0, records);

  const auto keys = chain_keys(namespace_key(g, ""), sessions[1].tokens, 64);
  const auto set =
      (*cluster)->cli((*cluster)->ports()[0], {"-c", "set", remote_key(keys[4]), "truncated"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  expect_sync(records - 1, 1);
  expect_node_b_restores(**cluster, g, sessions);

  const std::string dead = (*cluster)->seeds();
  cluster->reset();
  TempDir dir_c;
  auto c = Engine::open(node_options(dir_c, g, dead));
  ASSERT_OK(c);
  auto down = (*c)->sync_remote();
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code(), ErrorCode::kIo);
  EXPECT_NE(down.error().message().find("unreachable"), std::string::npos)
      << down.error().to_string();
}

}  // namespace
}  // namespace kvtier
