// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The kvtier command line.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <climits>
#include <string>

#include "bench.hpp"
#include "cli_common.hpp"
#include "seed/rank_worker.hpp"
#include "seed/seed_bench.hpp"

namespace {

std::string self_executable(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(argv0);
}

}  // namespace

// The seed workload's own limit (make_sessions), for pairs too: the store's capacity is sized to
// sessions x a session's KV, which must not overflow.
constexpr uint64_t kMaxBenchSessions = 100000;

int main(int argc, char** argv) {
  using namespace kvtier::cli;
  CLI::App app{"kvtier: offload LLM KV caches to NVMe and restore them"};
  // At most one here; "none" is checked after parsing, so that an unknown subcommand is reported
  // as the unexpected argument it is rather than as a missing subcommand.
  app.require_subcommand(0, 1);
  StoreFlags flags;
  uint64_t tokens = 0, seed = 1, sessions = 1;
  bool json = false;
  auto add_session_flags = [&](CLI::App* cmd) {
    flags.add_to(*cmd);
    cmd->add_option("--tokens", tokens, "Tokens per synthetic session")
        ->required()
        ->transform(whole_number(1, kMaxTokens));
    cmd->add_option("--seed", seed, "Seed of the first session (session i uses seed + i)")
        ->transform(whole_number(0, kMaxSeed));
    cmd->add_option("--sessions", sessions, "Number of sessions")->transform(whole_number(1, kMaxCount));
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
  std::string workload = "pairs";
  kvtier::seed::SeedFlags seed_flags;
  bench_cmd->add_option("--workload", workload,
                        "pairs: restore/ceiling pairs in this process (host memory); seed: the reference "
                        "evaluation (unique then repeat phase, one process per rank, Table 1, figures)")
      ->check(CLI::IsMember({"pairs", "seed"}));
  auto* sessions_opt = bench_cmd->add_option("--sessions", bench.sessions,
                                             "Sessions (seed: unique prompts, default 20; pairs: default 4)")
                           ->transform(whole_number(1, kMaxBenchSessions));
  auto* tokens_opt = bench_cmd->add_option("--tokens", bench.tokens,
                                           "Tokens per session (seed: sets --tokens-min and --tokens-max)")
                         ->transform(whole_number(1, kMaxTokens));
  bench_cmd->add_option("--tokens-min", seed_flags.tokens_min, "seed: fewest tokens of a session (default 98058)")
      ->transform(whole_number(1, kMaxTokens));
  bench_cmd->add_option("--tokens-max", seed_flags.tokens_max, "seed: most tokens of a session (default 100022)")
      ->transform(whole_number(1, kMaxTokens));
  bench_cmd->add_option("--seed", bench.seed, "Seed of the workload (token ids and session lengths)")
      ->transform(whole_number(0, kMaxSeed));
  bench_cmd->add_option("--repeat", bench.repeat, "pairs: restore/ceiling pairs per session and path")
      ->transform(whole_number(1, kMaxCount));
  auto* paths_opt = bench_cmd->add_option(
      "--paths", bench.paths,
      "Configurations, comma-separated. seed: posix, gds, dram, buffered (default all four); "
      "pairs: direct, buffered");
  bench_cmd->add_option("--ranks", seed_flags.ranks, "seed: tensor-parallel ranks, one process each (default 2)")
      ->transform(whole_number(1, 8));
  bench_cmd->add_option("--chunk-sweep", seed_flags.chunk_sweep,
                        "seed: more chunk sizes to run the --sweep-paths at, e.g. 64,1024");
  bench_cmd->add_option("--sweep-paths", seed_flags.sweep_paths, "seed: configurations of the chunk sweep (posix,gds)");
  bench_cmd->add_option("--device", seed_flags.device, "seed: where the paged KV cache lives: auto, cuda or host");
  bench_cmd->add_option("--dram-bytes", seed_flags.dram_bytes,
                        "seed: DRAM tier per rank for the dram configuration (auto: the working set, at most 60% "
                        "of available memory)");
  bench_cmd->add_option("--concurrency", seed_flags.concurrency,
                        "seed: restore N sessions at once per rank, for each N listed (e.g. 1,2,4,8,16), instead "
                        "of the sequential repeat phase");
  bench_cmd->add_option("--host-load", seed_flags.host_load,
                        "seed --concurrency: threads of background memory copying, measured alone and during "
                        "restores (0: none)")
      ->transform(whole_number(0, 1024));
  bench_cmd->add_option("--out", seed_flags.out, "seed: output directory (default kvtier-seed-<time>)");
  bool no_report = false;
  bench_cmd->add_flag("--no-report", no_report, "seed: skip the figures and report (seed_report.py)");
  bench_cmd->add_option("--json", bench.json, "pairs: write results as JSON to this file");
  bench_cmd->add_flag("--keep", bench.keep, "Keep the benchmark's store instead of deleting it");
  kvtier::seed::RankArgs rank_args;
  CLI::App* rank_cmd = app.add_subcommand("bench-rank", "One rank process of bench --workload seed");
  rank_cmd->group("");  // internal: started by bench
  kvtier::seed::add_rank_flags(*rank_cmd, rank_args);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    // CLI11 exits 1xx for its own errors; the README promises 2 for any bad argument. --help is
    // a ParseError too, with exit code 0.
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (*rank_cmd) return kvtier::seed::run_rank_worker(rank_args);
  if (*bench_cmd && workload == "seed") {
    if (*sessions_opt) seed_flags.sessions = bench.sessions;
    if (*tokens_opt) seed_flags.tokens_min = seed_flags.tokens_max = bench.tokens;
    if (*paths_opt) seed_flags.paths = bench.paths;
    seed_flags.seed = bench.seed;
    seed_flags.keep = bench.keep;
    seed_flags.report = !no_report;
    std::string command_line;
    for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
    return kvtier::seed::run_seed_bench(self_executable(argv[0]), bench_flags, seed_flags, command_line);
  }

  if (*put) return run_put(flags, tokens, seed, sessions);
  if (*get) return run_get(flags, tokens, seed, sessions);
  if (*ls) return run_ls(flags);
  if (*stat) return run_stat(flags, json);
  if (*verify) return run_verify(flags);
  if (*bench_cmd) return run_bench(bench_flags, bench);
  return 2;
}
