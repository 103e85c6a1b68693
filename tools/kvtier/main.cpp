// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The kvtier command line.
#include <CLI/CLI.hpp>

#include "bench.hpp"
#include "cli_common.hpp"

int main(int argc, char** argv) {
  using namespace kvtier::cli;
  CLI::App app{"kvtier: offload LLM KV caches to NVMe and restore them"};
  app.require_subcommand(1);
  StoreFlags flags;
  uint64_t tokens = 0, seed = 1, sessions = 1;
  bool json = false;
  auto add_session_flags = [&](CLI::App* cmd) {
    flags.add_to(*cmd);
    cmd->add_option("--tokens", tokens, "Tokens per synthetic session")->required();
    cmd->add_option("--seed", seed, "Seed of the first session (session i uses seed + i)");
    cmd->add_option("--sessions", sessions, "Number of sessions");
  };
  CLI::App* put = app.add_subcommand("put", "Save synthetic sessions (KV generated from token ids)");
  add_session_flags(put);
  CLI::App* get = app.add_subcommand("get", "Restore synthetic sessions and check them byte for byte");
  add_session_flags(get);
  CLI::App* ls = app.add_subcommand("ls", "List the store's segments");
  flags.add_to(*ls);
  CLI::App* stat = app.add_subcommand("stat", "Show the store's state");
  flags.add_to(*stat);
  stat->add_flag("--json", json, "Print JSON");
  CLI::App* verify = app.add_subcommand("verify", "Check every record's header and payload checksum");
  flags.add_to(*verify);
  BenchFlags bench;
  CLI::App* bench_cmd = app.add_subcommand("bench", "Save and restore sessions against the drive's read ceiling");
  // The default workload: rank 0's shard of a TP-2 deployment, as in the reference evaluation.
  StoreFlags bench_flags;
  bench_flags.root = ".";
  bench_flags.tp_world = 2;
  bench_flags.add_to(*bench_cmd);
  bench_cmd->add_option("--sessions", bench.sessions, "Sessions to save and restore");
  bench_cmd->add_option("--tokens", bench.tokens, "Tokens per session");
  bench_cmd->add_option("--seed", bench.seed, "Seed of the first session");
  bench_cmd->add_option("--repeat", bench.repeat, "Restore/ceiling pairs per session and path (medians are reported)");
  bench_cmd->add_option("--paths", bench.paths, "Comma-separated I/O paths to restore over (direct, buffered)");
  bench_cmd->add_option("--json", bench.json, "Write results as JSON to this file");
  bench_cmd->add_flag("--keep", bench.keep, "Keep the benchmark's store instead of deleting it");
  CLI11_PARSE(app, argc, argv);

  if (*put) return run_put(flags, tokens, seed, sessions);
  if (*get) return run_get(flags, tokens, seed, sessions);
  if (*ls) return run_ls(flags);
  if (*stat) return run_stat(flags, json);
  if (*verify) return run_verify(flags);
  if (*bench_cmd) return run_bench(bench_flags, bench);
  return 2;
}
