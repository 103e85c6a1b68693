// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engines sharing a real cluster in tests: options for a node, seeded sessions, waiting for what
// the engine does in the background, and counting or clearing what the cluster holds.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "redis_cluster.hpp"
#include "test_util.hpp"

namespace kvtier::testing {

inline Options node_options(const TempDir& dir, const KvGeometry& g, const std::string& seeds) {
  Options o = small_options(dir.str(), g);
  o.remote.seeds = seeds;
  return o;
}

/// Waits until `field` of the engine's Stats reaches `want` (write-behind and promotion run in the
/// background).
inline bool wait_for(Engine& e, uint64_t Stats::*field, uint64_t want) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (e.stats().*field < want) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

struct Session {
  std::vector<Token> tokens;
  std::unique_ptr<HostKv> kv;
};

inline Session make_session(const KvGeometry& g, uint64_t seed, uint64_t n) {
  Session s{synthetic::tokens(seed, n), std::make_unique<HostKv>(g, n)};
  synthetic::fill_kv(g, s.tokens, s.kv->span(), n);
  return s;
}

/// Saves `s` on a node of its own and waits until the cluster has every record.
inline void publish_from_node_a(const RedisCluster& cluster, const KvGeometry& g,
                                const Session& s) {
  TempDir dir;
  auto a = Engine::open(node_options(dir, g, cluster.seeds()));
  ASSERT_OK(a);
  auto saved = (*a)->save(s.tokens, s.kv->view);
  ASSERT_OK(saved);
  ASSERT_TRUE(wait_for(**a, &Stats::remote_writes, saved->chunks_written)) << (*a)->stats().remote;
}

/// Keys the cluster's masters hold (DBSIZE of each; replicas hold copies).
inline Result<uint64_t> cluster_keys(const RedisCluster& cluster) {
  auto nodes = cluster.nodes();
  if (!nodes) return fail(nodes.error());
  uint64_t keys = 0;
  for (const auto& node : *nodes) {
    if (!node.master || node.failed) continue;
    const ToolRun run = cluster.cli(node.port, {"dbsize"});
    if (run.exit_code != 0) return fail(ErrorCode::kIo, "dbsize: " + run.output);
    keys += std::stoull(run.output);
  }
  return keys;
}

/// FLUSHALL on every master: the cluster loses everything (as after a restart without
/// persistence).
inline Status flush_cluster(const RedisCluster& cluster) {
  auto nodes = cluster.nodes();
  if (!nodes) return nodes.error();
  for (const auto& node : *nodes) {
    if (!node.master || node.failed) continue;
    const ToolRun run = cluster.cli(node.port, {"flushall"});
    if (run.exit_code != 0) return Status(ErrorCode::kIo, "flushall: " + run.output);
  }
  return cluster.wait_replicated();
}

}  // namespace kvtier::testing
