// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// ClusterClient when nodes die: a master killed during a read loop, a cluster that was never
// there, a server that goes away. Failures are per-key outcomes, quick, and never wrong bytes.
#include <gtest/gtest.h>

#include <chrono>

#include "remote_test_util.hpp"

namespace kvtier::remote {
namespace {

using kvtier::testing::RedisCluster;
using kvtier::testing::test_seed;
using namespace kvtier::remote::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(RemoteClusterFaults, MasterKilledMidLoopGivesNoWrongBytesAndReadsResumeAfterFailover) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster));
  ASSERT_OK(client);
  const Dataset data = make_dataset(test_seed(), 300, {}, 128 << 10);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, data.keys.size());
  // Replication is asynchronous: only writes the replicas hold survive the failover.
  ASSERT_OK((*cluster)->wait_replicated());
  auto victim = (*cluster)->master_of(key_slot(data.keys[0]));
  ASSERT_OK(victim);

  Checker checker(data);
  size_t failed = 0, absent = 0, full_rounds_after = 0, rounds = 0;
  bool killed = false, failed_over = false;
  const auto start = Clock::now();
  while (full_rounds_after < 3) {
    ASSERT_LT(Clock::now() - start, 60s) << "reads did not recover";
    if (rounds == 3 && !killed) {
      ASSERT_OK((*cluster)->kill(victim->port));
      killed = true;
    }
    checker.reset();
    const auto t = tally((*client)->get(data.keys, checker.sink()));
    failed += t.failed;
    absent += t.absent;
    ++rounds;
    if (killed && !failed_over) {
      // Poll the cluster's own view between rounds; the loop keeps reading meanwhile.
      auto owner = (*cluster)->master_of(key_slot(data.keys[0]));
      failed_over = owner.has_value() && owner->port != victim->port;
    }
    if (failed_over && t.done == data.keys.size()) ++full_rounds_after;
  }
  std::printf(
      "failover: %zu rounds, %zu key reads failed (misses), counters refreshes=%llu "
      "connects=%llu\n",
      rounds, failed, static_cast<unsigned long long>((*client)->counters().refreshes),
      static_cast<unsigned long long>((*client)->counters().connects));
  EXPECT_EQ(checker.wrong(), 0u);
  EXPECT_EQ(checker.duplicates(), 0u);
  EXPECT_EQ(absent, 0u);  // a failover loses no replicated key
  EXPECT_GT(failed, 0u);  // the loop did read through the outage
}

TEST(RemoteClusterFaults, UnreachableClusterAtStartIsAQuickCleanError) {
  // Ports that nothing listens on: a server started and stopped leaves them free.
  std::string seeds;
  {
    auto server = RedisCluster::start({.masters = 1, .replicas_per_master = 0, .cluster = false});
    ASSERT_OK(server);
    seeds = (*server)->seeds();
  }
  ClientConfig config;
  config.seeds = *parse_seeds(seeds + ",127.0.0.1:1");
  const auto start = Clock::now();
  auto client = ClusterClient::create(config);
  ASSERT_FALSE(client.has_value());
  EXPECT_EQ(client.error().code(), ErrorCode::kIo) << client.error().to_string();
  EXPECT_NE(client.error().message().find("no node reachable"), std::string::npos)
      << client.error().message();
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(RemoteClusterFaults, ServerGoneMidRunFailsEveryGetAndSetQuicklyWithoutThrowing) {
  auto server = RedisCluster::start({.masters = 1, .replicas_per_master = 0, .cluster = false});
  ASSERT_OK(server);
  auto client = ClusterClient::create(config_for(**server));
  ASSERT_OK(client);
  const Dataset data = make_dataset(test_seed(), 32, {}, 8 << 10);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, data.keys.size());
  ASSERT_OK((*server)->kill((*server)->ports()[0]));

  Checker checker(data);
  const auto start = Clock::now();
  const auto outcomes = (*client)->get(data.keys, checker.sink());
  EXPECT_LT(Clock::now() - start, 3s);
  EXPECT_EQ(tally(outcomes).failed, data.keys.size());
  for (const auto& o : outcomes) EXPECT_EQ(o.error.code(), ErrorCode::kIo) << o.error.to_string();
  EXPECT_EQ(checker.wrong(), 0u);
  // Writes fail the same way.
  EXPECT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).failed, data.keys.size());
}

}  // namespace
}  // namespace kvtier::remote
