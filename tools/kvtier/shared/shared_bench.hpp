// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// `kvtier bench --workload shared`: two serving nodes sharing KV through a Redis Cluster. Node A
// (its own rank processes and local store) saves the sessions with the remote tier and waits until
// write-behind has drained; node B (other processes, an empty store of its own, the same cluster)
// then restores them, alternating per round: (a) from the cluster, (b) the ceiling, a raw parallel
// GET of the same values written directly against hiredis (raw_get.hpp), (c) from node B's own
// drive after a local save of the same sessions. Every restore is compared byte for byte with the
// synthetic KV; any wrong byte fails the run. Table, JSON and a figure (seed_report.py).
#pragma once

#include <cstdint>
#include <string>

#include "cli_common.hpp"

namespace kvtier::shared {

struct SharedFlags {
  uint64_t sessions = 20;  // the seed workload's defaults
  uint64_t tokens_min = 98058;
  uint64_t tokens_max = 100022;
  uint64_t seed = 1;
  uint32_t ranks = 2;   // tensor-parallel world: one process per rank and node
  uint64_t rounds = 3;  // (a), (b), (c) per session and round
  std::string device = "auto";
  std::string out;
  bool keep = false;
  bool report = true;
};

/// `self` is the kvtier executable (started again for each rank of each node). `store.remote`
/// names the cluster; the benchmark starts no cluster of its own.
int run_shared_bench(const std::string& self, cli::StoreFlags store, const SharedFlags& flags,
                     const std::string& command_line);

}  // namespace kvtier::shared
