// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// ClusterClient against real redis-server processes: byte-exact round trips across shards,
// redirections, a standalone server, passwords and TTLs.
#include <gtest/gtest.h>

#include <thread>

#include "remote_test_util.hpp"

namespace kvtier::remote {
namespace {

using kvtier::testing::RedisCluster;
using kvtier::testing::test_seed;
using namespace kvtier::remote::testing;
using namespace std::chrono_literals;

constexpr const char* kPassword = "kvtier-test-pw";

TEST(RemoteCluster, SeededValuesOfManySizesRoundTripByteExactAcrossShards) {
  auto cluster = RedisCluster::start({.password = kPassword});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster, kPassword));
  ASSERT_OK(client);
  EXPECT_FALSE((*client)->standalone());
  const Dataset data =
      make_dataset(test_seed(), 150, {0, 1, 4095, 4096, 4097, (4u << 20) + 3, 1u << 20}, 2u << 20);
  const auto stored = tally((*client)->set(data.keys, data.spans(), 0ms));
  ASSERT_EQ(stored.done, data.keys.size());

  Checker checker(data);
  const auto read = tally((*client)->get(data.keys, checker.sink()));
  EXPECT_EQ(read.done, data.keys.size());
  EXPECT_EQ(checker.wrong(), 0u);
  EXPECT_EQ(checker.duplicates(), 0u);
  for (size_t i = 0; i < data.keys.size(); ++i) EXPECT_TRUE(checker.seen(i)) << i;

  // Every master holds a share: the batch really went to all shards.
  auto nodes = (*cluster)->nodes();
  ASSERT_OK(nodes);
  for (const auto& node : *nodes) {
    if (!node.master) continue;
    const auto size = (*cluster)->cli(node.port, {"dbsize"});
    EXPECT_GT(std::stoul(size.output), 0u) << "master on port " << node.port;
  }

  // Keys never written are absent, and nothing reaches the sink for them.
  const Dataset other = make_dataset(test_seed() + 1, 20, {}, 16);
  Checker none(other);
  const auto missing = tally((*client)->get(other.keys, none.sink()));
  EXPECT_EQ(missing.absent, other.keys.size());
  for (size_t i = 0; i < other.keys.size(); ++i) EXPECT_FALSE(none.seen(i));
}

// STRLEN batches (a lookup's existence check): each value's size across the shards, never its
// bytes; a key never written is absent with size 0.
TEST(RemoteCluster, SizesAreTheValuesLengthsAndMissingKeysAreAbsent) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster));
  ASSERT_OK(client);
  Dataset data = make_dataset(test_seed(), 200, {1, 4096, 1u << 20}, 64u << 10);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, data.keys.size());
  const Dataset other = make_dataset(test_seed() + 1, 50, {}, 16);
  std::vector<std::string> keys = data.keys;
  keys.insert(keys.end(), other.keys.begin(), other.keys.end());
  const auto sizes = (*client)->sizes(keys);
  ASSERT_EQ(sizes.size(), keys.size());
  for (size_t i = 0; i < data.keys.size(); ++i) {
    EXPECT_EQ(sizes[i].state, KeyState::kDone) << i << ": " << sizes[i].error.to_string();
    EXPECT_EQ(sizes[i].size, data.values[i].size()) << i;
  }
  for (size_t i = data.keys.size(); i < keys.size(); ++i) {
    EXPECT_EQ(sizes[i].state, KeyState::kAbsent) << i;
    EXPECT_EQ(sizes[i].size, 0u) << i;
  }
}

// get_owned with an allocator: every value lands in the memory it gave (one copy out of hiredis's
// read buffer), byte-exact; where it gives none (every third key here), hiredis's own reply holds
// the value, also byte-exact.
TEST(RemoteCluster, OwnedValuesLandInTheAllocatorsMemoryOrInTheReply) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster));
  ASSERT_OK(client);
  const Dataset data = make_dataset(test_seed(), 60, {0, 1, 4096, (1u << 20) + 3}, 2u << 20);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, data.keys.size());
  std::vector<std::vector<std::byte>> given(data.keys.size());
  std::atomic<size_t> lent{0};
  const ValueAllocator allocate = [&](size_t i, size_t len) -> ValueBuffer {
    if (i % 3 == 2) return {};
    given[i].resize(len);
    lent++;
    return {std::span(given[i]), nullptr};
  };
  std::vector<OwnedValue> got(data.keys.size());
  const auto read = tally((*client)->get_owned(
      data.keys, [&](size_t i, OwnedValue v) { got[i] = std::move(v); }, &allocate));
  EXPECT_EQ(read.done, data.keys.size());
  EXPECT_EQ(lent.load(), data.keys.size() - data.keys.size() / 3);
  for (size_t i = 0; i < data.keys.size(); ++i) {
    const std::string_view bytes(reinterpret_cast<const char*>(got[i].bytes.data()),
                                 got[i].bytes.size());
    EXPECT_EQ(bytes, data.values[i]) << "key " << i;
    if (i % 3 != 2) {
      EXPECT_EQ(got[i].bytes.data(), given[i].data()) << "key " << i;
    } else {
      EXPECT_NE(got[i].owner, nullptr) << "key " << i;
    }
  }
}

TEST(RemoteCluster, TtlExpiresValues) {
  auto cluster = RedisCluster::start({.masters = 1, .replicas_per_master = 0, .cluster = false});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster));
  ASSERT_OK(client);
  const Dataset data = make_dataset(test_seed(), 4, {}, 1024);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 200ms)).done, data.keys.size());
  const auto ttl = (*cluster)->cli((*cluster)->ports()[0], {"pttl", data.keys[0]});
  EXPECT_GT(std::stol(ttl.output), 0);
  EXPECT_LE(std::stol(ttl.output), 200);
  std::this_thread::sleep_for(400ms);
  Checker checker(data);
  EXPECT_EQ(tally((*client)->get(data.keys, checker.sink())).absent, data.keys.size());
}

TEST(RemoteCluster, StandaloneServerServesEverySlot) {
  auto server = RedisCluster::start({.masters = 1, .replicas_per_master = 0, .cluster = false});
  ASSERT_OK(server);
  auto client = ClusterClient::create(config_for(**server));
  ASSERT_OK(client);
  EXPECT_TRUE((*client)->standalone());
  const Dataset data = make_dataset(test_seed(), 64, {0, 3 << 20}, 256 << 10);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, data.keys.size());
  Checker checker(data);
  EXPECT_EQ(tally((*client)->get(data.keys, checker.sink())).done, data.keys.size());
  EXPECT_EQ(checker.wrong(), 0u);
}

TEST(RemoteCluster, WrongOrMissingPasswordIsAClearErrorThatNeverShowsThePassword) {
  auto server = RedisCluster::start(
      {.masters = 1, .replicas_per_master = 0, .cluster = false, .password = kPassword});
  ASSERT_OK(server);
  auto wrong = ClusterClient::create(config_for(**server, "not-the-password"));
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.error().code(), ErrorCode::kPermission) << wrong.error().to_string();
  EXPECT_EQ(wrong.error().message().find("not-the-password"), std::string::npos);
  EXPECT_NE(wrong.error().message().find("AUTH"), std::string::npos) << wrong.error().message();

  auto missing = ClusterClient::create(config_for(**server));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kPermission) << missing.error().to_string();

  EXPECT_OK(ClusterClient::create(config_for(**server, kPassword)));
}

TEST(RemoteCluster, FollowsAskDuringAMigrationAndMovedAfterIt) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster));
  ASSERT_OK(client);
  const Dataset data = make_dataset(test_seed(), 2, {70000, 5}, 16);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, 2u);

  // Migrate the first key's slot by hand: its key moves, the slot stays MIGRATING, so the source
  // answers ASK for it.
  const uint16_t slot = key_slot(data.keys[0]);
  auto source = (*cluster)->master_of(slot);
  ASSERT_OK(source);
  auto nodes = (*cluster)->nodes();
  ASSERT_OK(nodes);
  RedisCluster::NodeInfo target;
  for (const auto& n : *nodes) {
    if (n.master && n.id != source->id) target = n;
  }
  const std::string s = std::to_string(slot);
  auto& c = **cluster;
  ASSERT_EQ(c.cli(target.port, {"cluster", "setslot", s, "importing", source->id}).exit_code, 0);
  ASSERT_EQ(c.cli(source->port, {"cluster", "setslot", s, "migrating", target.id}).exit_code, 0);
  const auto migrate = c.cli(source->port, {"migrate", "127.0.0.1", std::to_string(target.port),
                                            data.keys[0], "0", "5000"});
  ASSERT_NE(migrate.output.find("OK"), std::string::npos) << migrate.output;

  Checker checker(data);
  EXPECT_EQ(tally((*client)->get(data.keys, checker.sink())).done, 2u);
  EXPECT_EQ(checker.wrong(), 0u);
  EXPECT_GE((*client)->counters().ask, 1u);

  // Finish the migration: now the source answers MOVED and the client updates its map.
  for (const auto& n : *nodes) {
    if (n.master) {
      ASSERT_EQ(c.cli(n.port, {"cluster", "setslot", s, "node", target.id}).exit_code, 0);
    }
  }
  checker.reset();
  EXPECT_EQ(tally((*client)->get(data.keys, checker.sink())).done, 2u);
  EXPECT_EQ(checker.wrong(), 0u);
  EXPECT_GE((*client)->counters().moved, 1u);
}

TEST(RemoteCluster, ReadsDuringAReshardStayByteExact) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  auto client = ClusterClient::create(config_for(**cluster));
  ASSERT_OK(client);
  const Dataset data = make_dataset(test_seed(), 600, {}, 64 << 10);
  ASSERT_EQ(tally((*client)->set(data.keys, data.spans(), 0ms)).done, data.keys.size());
  auto nodes = (*cluster)->nodes();
  ASSERT_OK(nodes);
  std::vector<std::string> masters;
  for (const auto& n : *nodes) {
    if (n.master) masters.push_back(n.id);
  }
  ASSERT_EQ(masters.size(), 3u);

  std::atomic<bool> done{false};
  kvtier::testing::ToolRun reshard;
  std::thread mover([&] {
    reshard = (*cluster)->reshard(masters[0], masters[1], 2000);
    done = true;
  });
  Checker checker(data);
  size_t rounds = 0, absent = 0, failed = 0;
  while (!done || rounds < 3) {
    checker.reset();
    const auto t = tally((*client)->get(data.keys, checker.sink()));
    absent += t.absent;
    failed += t.failed;
    ++rounds;
  }
  mover.join();
  ASSERT_EQ(reshard.exit_code, 0) << reshard.output;
  std::printf("reshard: %zu read rounds, counters moved=%llu ask=%llu refreshes=%llu\n", rounds,
              static_cast<unsigned long long>((*client)->counters().moved),
              static_cast<unsigned long long>((*client)->counters().ask),
              static_cast<unsigned long long>((*client)->counters().refreshes));
  EXPECT_EQ(checker.wrong(), 0u);
  EXPECT_EQ(absent, 0u);
  EXPECT_EQ(failed, 0u);
  EXPECT_GE((*client)->counters().moved, 1u);
}

}  // namespace
}  // namespace kvtier::remote
