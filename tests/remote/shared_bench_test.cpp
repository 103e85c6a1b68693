// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// `kvtier bench --workload shared` end to end against a real cluster: two node processes, the raw
// GET ceiling, node B's own store, and the JSON that perf.md's figures come from.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "redis_cluster.hpp"
#include "test_util.hpp"

namespace kvtier::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

TEST(SharedBench, NodeBRestoresNodeASessionsExactlyAndReportsItsCeilingRatio) {
  auto cluster = RedisCluster::start({});
  ASSERT_OK(cluster);
  const fs::path dir =
      fs::temp_directory_path() / ("kvtier-shared-bench-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Two sessions, one of them ending in a partial chunk, two rounds, TP 2: every path of the
  // workload (two processes per node, (a), (b) and (c)) on a few MB.
  const ToolRun run = run_tool({KVTIER_CLI_PATH,  "bench",
                                "--workload",     "shared",
                                "--remote",       (*cluster)->seeds(),
                                "--store",        dir.string(),
                                "--model",        "tiny",
                                "--chunk-tokens", "64",
                                "--sessions",     "2",
                                "--tokens-min",   "700",
                                "--tokens-max",   "1000",
                                "--repeat",       "2",
                                "--ranks",        "2",
                                "--device",       "host",
                                "--out",          (dir / "out").string(),
                                "--no-report"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(dir / "out" / "shared.json");
  ASSERT_TRUE(in.good()) << run.output;
  const Json data = Json::parse(in);
  fs::remove_all(dir);

  EXPECT_EQ(data["node_a"]["remote_write_drops"], 0);
  EXPECT_EQ(data["node_a"]["remote_writes"], data["node_a"]["records_saved"]);
  // Two sessions x two rounds, restored from the cluster and from node B's store: 8 restores,
  // every byte of each compared with the synthetic KV.
  const uint64_t per_token = data["requests"][0]["kv_bytes"].get<uint64_t>() /
                             data["requests"][0]["tokens"].get<uint64_t>();
  uint64_t tokens = 0;
  for (const Json& t : data["workload"]["session_tokens"]) tokens += t.get<uint64_t>();
  EXPECT_EQ(data["check"]["restores"], 8);
  EXPECT_EQ(data["check"]["bytes_compared"].get<uint64_t>(), 2 * 2 * tokens * per_token);
  EXPECT_EQ(data["check"]["wrong_restores"], 0);
  for (const Json& r : data["requests"]) {
    if (r["config"] == "cluster") {
      EXPECT_EQ(r["remote_hits"].get<uint64_t>(),
                2 * ((r["tokens"].get<uint64_t>() + 63) / 64));  // every chunk of both ranks
    }
  }
  ASSERT_EQ(data["summary"].size(), 3u);
  for (const Json& s : data["summary"]) {
    EXPECT_GT(s["gbps"].get<double>(), 0) << s["config"];
    EXPECT_GT(s["ratio_to_ceiling"].get<double>(), 0) << s["config"];
    EXPECT_GE(s["cpu_core_s_per_gb"].get<double>(), 0) << s["config"];
  }
}

}  // namespace
}  // namespace kvtier::testing
