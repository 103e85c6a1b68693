// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The kvtier CLI with --remote against a real cluster: a fresh node restores from it (README
// "Sharing KV across nodes"), put says what reached the cluster and waits when asked, sync
// publishes what the cluster lacks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <regex>

#include "engine_remote_util.hpp"
#include "redis_cluster.hpp"
#include "test_util.hpp"

namespace kvtier::testing {
namespace {

namespace fs = std::filesystem;

ToolRun kvtier(std::vector<std::string> args) {
  args.insert(args.begin(), KVTIER_CLI_PATH);
  return run_tool(args);
}

/// The flags every command of these tests takes: a small model, small chunks.
std::vector<std::string> with(std::vector<std::string> args, const std::string& store,
                              const std::string& chunk = "64") {
  for (const std::string& a : {std::string("--store"), store, std::string("--model"),
                               std::string("tiny"), std::string("--chunk-tokens"), chunk}) {
    args.push_back(a);
  }
  return args;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The numbers of the first match of `pattern` in `text`, or empty.
std::vector<uint64_t> numbers(const std::string& text, const std::string& pattern) {
  std::smatch m;
  std::vector<uint64_t> out;
  if (!std::regex_search(text, m, std::regex(pattern))) return out;
  for (size_t i = 1; i < m.size(); ++i) out.push_back(std::stoull(m[i].str()));
  return out;
}

// README's example on a node that has never run kvtier: `get` with --remote makes the node's store
// (as put would) and restores from the cluster, keeping a copy locally (before: exit 3, "no store
// at nodeB/rank0of1", even after mkdir nodeB). Without --remote a missing store stays an error.
TEST(CliRemote, GetOnAFreshNodeRestoresFromTheClusterAndKeepsACopy) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  TempDir dir;
  const std::string a = (dir.path() / "nodeA").string(), b = (dir.path() / "nodeB").string();
  const std::vector<std::string> remote = {"--remote", (*cluster)->seeds()};
  const ToolRun put = kvtier(plus(with({"put", "--tokens", "3000", "--sessions", "2"}, a), remote));
  ASSERT_EQ(put.exit_code, 0) << put.output;

  const ToolRun get = kvtier(plus(with({"get", "--tokens", "3000", "--sessions", "2"}, b), remote));
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_EQ(numbers(get.output, R"(get seed=1 restored (\d+)/3000)"), std::vector<uint64_t>{3000});
  EXPECT_EQ(numbers(get.output, R"(get seed=2 restored (\d+)/3000)"), std::vector<uint64_t>{3000});
  EXPECT_EQ(get.output.find("MISMATCH"), std::string::npos) << get.output;

  // The copy B kept: served without the cluster.
  const ToolRun local = kvtier(with({"get", "--tokens", "3000", "--sessions", "2"}, b));
  EXPECT_EQ(local.exit_code, 0) << local.output;

  const std::string c = (dir.path() / "nodeC").string();
  const ToolRun missing = kvtier(with({"get", "--tokens", "3000"}, c));
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  EXPECT_NE(missing.output.find("no store"), std::string::npos) << missing.output;
  EXPECT_FALSE(fs::exists(c));
}

// 6 sessions of 1,000 records put faster than the cluster takes them overflow the write-behind
// queue (4,096 records): put says how many reached the cluster and how many were dropped, matching
// what the cluster holds (before: nothing said, exit 0, 4,000 of 6,000 there). --remote-wait
// publishes the rest before exiting, and exits 1 when it cannot.
TEST(CliRemote, PutSaysWhatReachedTheClusterAndWaitsWhenAsked) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  TempDir dir;
  const std::vector<std::string> remote = {"--remote", (*cluster)->seeds()};
  const std::vector<std::string> put = {"put", "--tokens", "16000", "--sessions", "6"};
  const ToolRun first = kvtier(plus(with(put, (dir.path() / "a").string(), "16"), remote));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto said = numbers(
      first.output,
      R"(remote: (\d+) records saved: (\d+) written to the cluster, (\d+) dropped \(write-behind queue full\), (\d+) failed)");
  ASSERT_EQ(said.size(), 4u) << first.output;
  EXPECT_EQ(said[0], 6000u);
  EXPECT_EQ(said[1] + said[2], 6000u);
  EXPECT_EQ(said[3], 0u);
  auto held = cluster_keys(**cluster);
  ASSERT_OK(held);
  EXPECT_EQ(*held, said[1]);
  if (said[2] > 0) {
    EXPECT_NE(first.output.find("kvtier sync"), std::string::npos) << first.output;
  }

  ASSERT_OK(flush_cluster(**cluster));
  const ToolRun waited =
      kvtier(plus(with(put, (dir.path() / "b").string(), "16"), plus(remote, {"--remote-wait"})));
  ASSERT_EQ(waited.exit_code, 0) << waited.output;
  EXPECT_EQ(numbers(waited.output, R"(remote-wait: (\d+) of (\d+) records in the cluster)"),
            (std::vector<uint64_t>{6000, 6000}))
      << waited.output;
  held = cluster_keys(**cluster);
  ASSERT_OK(held);
  EXPECT_EQ(*held, 6000u);

  const std::string dead = (*cluster)->seeds();
  cluster->reset();
  const ToolRun unpublished =
      kvtier(plus(with({"put", "--tokens", "640"}, (dir.path() / "c").string()),
                  {"--remote", dead, "--remote-wait"}));
  EXPECT_EQ(unpublished.exit_code, 1) << unpublished.output;
  EXPECT_NE(unpublished.output.find("not published"), std::string::npos) << unpublished.output;
}

// Records saved before --remote was given, or lost by the cluster (flushed), reach it with
// `kvtier sync`, which counts what it found and did; a fresh node then restores them (before:
// no such command; such records never reached the cluster).
TEST(CliRemote, SyncPublishesTheLocalRecordsTheClusterLacks) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  TempDir dir;
  const std::string a = (dir.path() / "a").string();
  const std::vector<std::string> remote = {"--remote", (*cluster)->seeds()};
  ASSERT_EQ(kvtier(with({"put", "--tokens", "1000", "--sessions", "3"}, a)).exit_code, 0);
  const uint64_t records = 3 * 16;  // 1,000 tokens in chunks of 64

  const std::string sync_line =
      R"(sync: (\d+) local records: (\d+) already in the cluster, (\d+) published, (\d+) failed)";
  const ToolRun first = kvtier(plus(with({"sync"}, a), remote));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(numbers(first.output, sync_line), (std::vector<uint64_t>{records, 0, records, 0}))
      << first.output;
  auto held = cluster_keys(**cluster);
  ASSERT_OK(held);
  EXPECT_EQ(*held, records);

  const ToolRun again = kvtier(plus(with({"sync"}, a), remote));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(numbers(again.output, sync_line), (std::vector<uint64_t>{records, records, 0, 0}))
      << again.output;

  ASSERT_OK(flush_cluster(**cluster));
  const ToolRun refill = kvtier(plus(with({"sync"}, a), remote));
  ASSERT_EQ(refill.exit_code, 0) << refill.output;
  EXPECT_EQ(numbers(refill.output, sync_line), (std::vector<uint64_t>{records, 0, records, 0}))
      << refill.output;
  const ToolRun get = kvtier(plus(
      with({"get", "--tokens", "1000", "--sessions", "3"}, (dir.path() / "b").string()), remote));
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_EQ(get.output.find("MISMATCH"), std::string::npos) << get.output;

  const ToolRun no_remote = kvtier(with({"sync"}, a));
  EXPECT_EQ(no_remote.exit_code, 2) << no_remote.output;
  const std::string dead = (*cluster)->seeds();
  cluster->reset();
  const ToolRun down = kvtier(plus(with({"sync"}, a), {"--remote", dead}));
  EXPECT_EQ(down.exit_code, 4) << down.output;
  EXPECT_NE(down.output.find("unreachable"), std::string::npos) << down.output;
}

}  // namespace
}  // namespace kvtier::testing
