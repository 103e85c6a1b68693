// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Real redis-server processes for tests: a cluster (masters + replicas, made with
// `redis-cli --cluster create`) or one standalone server, on free 127.0.0.1 ports in a temporary
// directory. Every process is killed when the fixture goes, and (PR_SET_PDEATHSIG) when the test
// process dies without running destructors.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier::testing {

/// Output and exit status of a tool run to completion.
struct ToolRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

/// Runs argv[0] (looked up in PATH) with the rest as arguments and waits for it, at most `limit`:
/// past it the tool is killed and the run's exit code is 124, its output saying so. (redis-cli
/// --cluster create waits without end for nodes that never agree.)
ToolRun run_tool(const std::vector<std::string>& argv,
                 std::chrono::milliseconds limit = std::chrono::seconds(90));

class RedisCluster {
 public:
  struct Config {
    int masters = 3;
    int replicas_per_master = 1;
    bool cluster = true;       // false: one standalone server (masters must be 1, no replicas)
    std::string password;      // "" = none
    bool form_cluster = true;  // false: cluster-enabled nodes left unjoined, no slots assigned
  };
  struct NodeInfo {
    std::string id;
    uint16_t port = 0;
    bool master = false;
    bool failed = false;
    std::vector<std::pair<uint32_t, uint32_t>> slots;  // inclusive ranges served (masters)
  };

  /// Starts the servers, creates the cluster and waits for cluster_state:ok on every node.
  [[nodiscard]] static Result<std::unique_ptr<RedisCluster>> start(Config config);
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  /// "redis://127.0.0.1:p1,127.0.0.1:p2,..." (every node).
  [[nodiscard]] std::string seeds() const;
  [[nodiscard]] const std::vector<uint16_t>& ports() const { return ports_; }
  /// redis-cli -p port <args...> (with the password when there is one).
  [[nodiscard]] ToolRun cli(uint16_t port, const std::vector<std::string>& args) const;
  /// CLUSTER NODES as seen by a live node.
  [[nodiscard]] Result<std::vector<NodeInfo>> nodes() const;
  /// The live master serving `slot`.
  [[nodiscard]] Result<NodeInfo> master_of(uint32_t slot) const;
  /// Waits until every master's replicas have every write the master has acknowledged.
  [[nodiscard]] Status wait_replicated() const;
  /// SIGKILLs the server on `port`.
  [[nodiscard]] Status kill(uint16_t port);
  /// Waits until a replica has taken over `port`'s slots and every live node says cluster_state:ok.
  [[nodiscard]] Status wait_failover(uint16_t dead_port);
  /// `redis-cli --cluster reshard`: moves `slots` slots from one master to another.
  [[nodiscard]] ToolRun reshard(const std::string& from_id, const std::string& to_id,
                                int slots) const;

 private:
  explicit RedisCluster(Config config);
  [[nodiscard]] Status launch();
  /// Starts one redis-server on `port` and waits until the server answering there is that one.
  [[nodiscard]] Status start_server(uint16_t port);
  [[nodiscard]] Status create_cluster();
  [[nodiscard]] Status wait_state_ok(std::chrono::milliseconds limit) const;
  [[nodiscard]] uint16_t live_port() const;

  Config config_;
  std::filesystem::path dir_;
  std::vector<uint16_t> ports_;
  std::vector<pid_t> pids_;  // -1 once killed and reaped
};

}  // namespace kvtier::testing
