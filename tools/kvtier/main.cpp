// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The kvtier command line.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <climits>
#include <cstdio>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "bench.hpp"
#include "cli_common.hpp"
#include "seed/kv_source.hpp"
#include "seed/rank_worker.hpp"
#include "seed/seed_bench.hpp"
#include "shared/shared_bench.hpp"

namespace {

using namespace kvtier::cli;

// The seed workload's own limit (make_sessions), for pairs too: the store's capacity is sized to
// sessions x a session's KV, which must not overflow.
constexpr uint64_t kMaxBenchSessions = 100000;

std::string self_executable(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(argv0);
}

std::string version() {
  return fmt::format("kvtier {} (built with io_uring: {}, CUDA: {}, cuFile: {}, Redis: {})",
                     KVTIER_VERSION_STRING, KVTIER_HAVE_IO_URING ? "yes" : "no",
                     KVTIER_HAVE_CUDA ? "yes" : "no", KVTIER_HAVE_CUFILE ? "yes" : "no",
                     KVTIER_HAVE_REDIS ? "yes" : "no");
}

/// put, get, ls, stat and verify: one store, the CLI's own synthetic sessions.
struct StoreCommands {
  StoreFlags flags;
  uint64_t tokens = 0, seed = 1, sessions = 1;
  bool remote_wait = false;
  StatFormat format = StatFormat::kText;
  CLI::App *put = nullptr, *get = nullptr, *ls = nullptr, *stat = nullptr, *verify = nullptr,
           *sync = nullptr, *tune = nullptr;

  void add_to(CLI::App& app) {
    put = app.add_subcommand("put", "Save synthetic sessions (KV generated from token ids)");
    add_session_flags(*put);
    put->add_flag("--remote-wait", remote_wait,
                  "Before exiting, publish to the cluster whatever of these sessions it lacks "
                  "(records the full write-behind queue dropped included); exit 1 if any could "
                  "not be")
        ->needs(put->get_option("--remote"));
    get = app.add_subcommand("get", "Restore synthetic sessions and check them byte for byte");
    add_session_flags(*get);
    // The readers take no flag that only matters when writing: ls reads the index, stat also
    // opens the I/O path it reports, verify reads every record through it.
    ls = app.add_subcommand("ls", "List the store's segments");
    flags.add_to(
        *ls,
        {.tenant = false, .layout = false, .io_path = false, .io_tuning = false, .dram = false});
    stat = app.add_subcommand("stat", "Show the store's state");
    flags.add_to(
        *stat,
        {.tenant = false, .layout = false, .io_path = true, .io_tuning = false, .dram = false});
    auto* json = stat->add_flag_callback(
        "--json", [this] { format = StatFormat::kJson; }, "Print JSON");
    stat->add_flag_callback(
            "--prometheus", [this] { format = StatFormat::kPrometheus; },
            "Print the engine's metrics in the Prometheus text format, labelled store=<dir>")
        ->excludes(json);
    verify = app.add_subcommand("verify", "Check every record's header and payload checksum");
    flags.add_to(
        *verify,
        {.tenant = false, .layout = false, .io_path = true, .io_tuning = true, .dram = false});
    tune = app.add_subcommand(
        "tune",
        "Probe each drive's best read pattern (request size x requests in flight) on its own "
        "segment files and keep it with the drive: engines opened later use it unless "
        "--request-size or --staging is given");
    flags.add_to(
        *tune,
        {.tenant = false, .layout = false, .io_path = false, .io_tuning = false, .dram = false});
    sync = app.add_subcommand(
        "sync",
        "Publish every local record the cluster (--remote) lacks: saved before --remote was given, "
        "while the cluster was down, dropped by a full write-behind queue, or lost by the cluster");
    flags.add_to(*sync, {.tenant = true,
                         .layout = false,
                         .io_path = false,
                         .io_tuning = false,
                         .dram = false,
                         .remote = true});
  }

  void add_session_flags(CLI::App& cmd) {
    flags.add_to(cmd, {.remote = true});
    // Required, but checked after parsing (run()): CLI11 checks required options before it
    // reports unknown ones, so `put --bogus` said only that --tokens was missing.
    cmd.add_option("--tokens", tokens, "Tokens per synthetic session (required)")
        ->transform(whole_number(1, kMaxTokens))
        ->default_str("");  // required: there is no default to show
    cmd.add_option("--seed", seed, "Seed of the first session (session i uses seed + i)")
        ->transform(whole_number(0, kMaxSeed));
    cmd.add_option("--sessions", sessions, "Number of sessions")
        ->transform(whole_number(1, kMaxCount));
  }

  /// The exit code, or -1 when none of these commands was given.
  int run() {
    CLI::App* cmd = nullptr;
    for (CLI::App* c : {put, get, ls, stat, verify, sync, tune}) {
      if (*c) cmd = c;
    }
    if (cmd == nullptr) return -1;
    // Without --model an existing store's own geometry is used (StoreFlags::options).
    flags.model_given = cmd->get_option("--model")->count() > 0;
    flags.chunk_tokens_given = cmd->get_option("--chunk-tokens")->count() > 0;
    if ((cmd == put || cmd == get) && cmd->get_option("--tokens")->count() == 0) {
      return report({kvtier::ErrorCode::kInvalidArgument, "--tokens is required"}, cmd->get_name());
    }
    if (cmd == put) return run_put(flags, tokens, seed, sessions, remote_wait);
    if (cmd == get) return run_get(flags, tokens, seed, sessions);
    if (cmd == ls) return run_ls(flags);
    if (cmd == stat) return run_stat(flags, format);
    if (cmd == sync) return run_sync(flags);
    if (cmd == tune) return run_tune(flags);
    return run_verify(flags);
  }
};

/// bench: the pairs workload (this process) and the seed workload (one process per rank).
struct BenchCommand {
  BenchFlags bench;
  // The default workload: rank 0's shard of a TP-2 deployment, as in the reference evaluation.
  StoreFlags flags = [] {
    StoreFlags f;
    f.root = ".";
    f.tp_world = 2;
    return f;
  }();
  std::string workload = "pairs";
  kvtier::seed::SeedFlags seed;
  bool no_report = false;
  CLI::App* cmd = nullptr;
  CLI::Option *sessions_opt = nullptr, *tokens_opt = nullptr, *paths_opt = nullptr;

  void add_to(CLI::App& app);
  int run(int argc, char** argv);
};

void BenchCommand::add_to(CLI::App& app) {
  cmd = app.add_subcommand("bench", "Save and restore sessions against the drive's read ceiling");
  // The I/O path of each restore is what --paths names, and a DRAM tier only what --dram-bytes
  // gives the seed workload's dram configuration: --io and --dram would change nothing.
  flags.add_to(*cmd, {.tenant = true,
                      .layout = true,
                      .io_path = false,
                      .io_tuning = true,
                      .dram = false,
                      .remote = true});
  cmd->get_option("--store")->description(
      "Where the benchmark's stores are made (pairs: <DIR>/bench-<pid>; seed: "
      "<DIR>/seed-chunk<N>), deleted "
      "afterwards unless --keep");
  cmd->get_option("--capacity")
      ->description(
          "Store capacity; auto: pairs sizes it to the sessions' KV + 1/8 + 2G, so that nothing is "
          "evicted; seed: 64G per rank")
      ->default_str("auto");
  cmd->add_option("--workload", workload,
                  "pairs: restore/ceiling pairs in this process (host memory); seed: the reference "
                  "evaluation (unique then repeat phase, one process per rank, Table 1, figures); "
                  "shared: node A saves into a Redis Cluster (--remote), node B restores from it, "
                  "against a raw GET ceiling and its own store")
      ->check(CLI::IsMember({"pairs", "seed", "shared"}));
  sessions_opt = cmd->add_option("--sessions", bench.sessions,
                                 "Sessions (pairs; seed: unique prompts, default 20)")
                     ->transform(whole_number(1, kMaxBenchSessions));
  tokens_opt = cmd->add_option("--tokens", bench.tokens,
                               "Tokens per session (pairs; seed: sets --tokens-min and "
                               "--tokens-max)")
                   ->transform(whole_number(1, kMaxTokens));
  cmd->add_option("--tokens-min", seed.tokens_min, "seed: fewest tokens of a session")
      ->transform(whole_number(1, kMaxTokens));
  cmd->add_option("--tokens-max", seed.tokens_max, "seed: most tokens of a session")
      ->transform(whole_number(1, kMaxTokens));
  cmd->add_option("--seed", bench.seed, "Seed of the workload (token ids and session lengths)")
      ->transform(whole_number(0, kMaxSeed));
  cmd->add_option(
         "--repeat", bench.repeat,
         "pairs: restore/ceiling pairs per session and path; shared: rounds of (a) cluster, (b) "
         "ceiling, (c) local per session")
      ->transform(whole_number(1, kMaxCount));
  paths_opt = cmd->add_option(
      "--paths", bench.paths,
      "Configurations, comma-separated. pairs: direct, buffered; seed: posix, gds, dram, "
      "buffered (default all four)");
  cmd->add_option("--ranks", seed.ranks,
                  "seed, shared: tensor-parallel ranks, one process each (per node)")
      ->transform(whole_number(1, 8));
  cmd->add_option("--restore-ranks", seed.restore_ranks,
                  "seed: TP sizes that also restore the store --ranks saved, e.g. 1,4,8 (needs "
                  "--store-format 2; rows 'posix TP A->B')");
  cmd->add_option("--chunk-sweep", seed.chunk_sweep,
                  "seed: more chunk sizes to run the --sweep-paths at, e.g. "
                  "64,1024 (default: none)");
  cmd->add_option("--sweep-paths", seed.sweep_paths, "seed: configurations of the chunk sweep");
  cmd->add_option("--device", seed.device,
                  "seed, shared: where the paged KV cache lives: auto, cuda or host")
      ->check(CLI::IsMember({"auto", "cuda", "host"}));
  cmd->add_option("--kv", seed.kv,
                  "seed: the KV: random (synthetic, incompressible), bf16-like (synthetic, each "
                  "16-bit word one of four exponents, as compressible as a model's bf16 KV; for "
                  "--compress split16; not a model's KV) or file:PATH (a forward pass's bf16 KV "
                  "that bench/codec/forward_kv.py wrote, with its PATH.json, tiled over the "
                  "model's layers and heads and the session's tokens; the model's head_dim must "
                  "be the file's)")
      ->check(kvtier::seed::kv_flag_validator());
  cmd->add_option(
      "--dram-bytes", seed.dram_bytes,
      "seed: DRAM tier per rank for the dram configuration (auto: the working set, at most 60% of "
      "available memory)");
  cmd->add_option("--concurrency", seed.concurrency,
                  "seed: restore N sessions at once per rank, for each N listed (e.g. 1,2,4,8,16), "
                  "instead of the "
                  "sequential repeat phase (default: none)");
  cmd->add_option("--host-load", seed.host_load,
                  "seed --concurrency: threads of background memory copying, measured alone and "
                  "during restores "
                  "(0: none)")
      ->transform(whole_number(0, 1024));
  cmd->add_option("--out", seed.out, "seed, shared: output directory")
      ->default_str("kvtier-seed-<time>, kvtier-shared-<time>");
  cmd->add_flag("--no-report", no_report, "seed: skip the figures and report (seed_report.py)");
  cmd->add_option("--json", bench.json,
                  "pairs: write results as JSON to this file (default: none)");
  cmd->add_flag("--keep", bench.keep, "Keep the benchmark's stores instead of deleting them");
  cmd->add_option("--fio", bench.fio,
                  "fio executable measuring the drive's ceiling: it reads each restore's file "
                  "ranges (same order "
                  "and request size, O_DIRECT) next to it; off: no independent ceiling");
  cmd->add_option("--fio-depth", bench.fio_depth,
                  "Requests in flight per fio stream (one per rank and drive); 0: the fastest of "
                  "1,2,4,8,16,32 "
                  "on the first session")
      ->transform(whole_number(0, 1024));
  cmd->add_option_function<std::string>(
         "--fio-requests",
         [this](const std::string& list) {
           std::stringstream in(list);
           for (std::string item; std::getline(in, item, ',');) {
             auto size = kvtier::parse_size(item);
             if (!size || *size == 0 || *size % 4096 != 0) {
               throw CLI::ValidationError("--fio-requests", "'" + item +
                                                                "' is not a request size (K/M/G, a "
                                                                "multiple of 4 KiB)");
             }
             bench.fio_requests.push_back(*size);
           }
         },
         "seed: request sizes fio also tries on the first session, e.g. 1M,4M,16M; the fastest "
         "size and depth found are the ceiling (default: kvtier's request size only)")
      ->type_name("LIST");
}

int BenchCommand::run(int argc, char** argv) {
  if (workload != "shared" && !flags.remote.empty()) {
    return report({kvtier::ErrorCode::kInvalidArgument,
                   "bench: --remote is for --workload shared (the other workloads have no remote "
                   "tier)"},
                  "bench");
  }
  if (workload != "seed" && workload != "shared") {
    if (flags.root.find(',') != std::string::npos) {
      return report(
          {kvtier::ErrorCode::kInvalidArgument,
           "bench: the pairs workload's --store takes one directory (it makes its store in it); "
           "--workload seed takes one per drive"},
          "bench");
    }
    return run_bench(flags, bench);
  }
  // The rank processes make their stores in each --store directory (one per drive); the workload
  // creates them, as put does, once its flags are found good.
  std::stringstream dirs(flags.root);
  for (std::string dir; std::getline(dirs, dir, ',');) {
    if (dir.empty())
      return report({kvtier::ErrorCode::kInvalidArgument, "bench: an empty directory in --store"},
                    "bench");
  }
  if (*sessions_opt) seed.sessions = bench.sessions;
  if (*tokens_opt) seed.tokens_min = seed.tokens_max = bench.tokens;
  if (*paths_opt) seed.paths = bench.paths;
  seed.seed = bench.seed;
  seed.keep = bench.keep;
  seed.fio = bench.fio;
  seed.fio_depth = bench.fio_depth;
  seed.fio_requests = bench.fio_requests;
  seed.report = !no_report;
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  if (workload == "shared") {
    kvtier::shared::SharedFlags shared{seed.sessions, seed.tokens_min, seed.tokens_max, seed.seed,
                                       seed.ranks,    bench.repeat,    seed.device,     seed.out,
                                       seed.keep,     seed.report};
    return kvtier::shared::run_shared_bench(self_executable(argv[0]), flags, shared, command_line);
  }
  return kvtier::seed::run_seed_bench(self_executable(argv[0]), flags, seed, command_line);
}

}  // namespace

int main(int argc, char** argv) {
  // Progress and results reach a pipe or a log as each line is written, not when a buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::setvbuf(stderr, nullptr, _IOLBF, 0);
  CLI::App app{"kvtier: offload LLM KV caches to NVMe and restore them"};
  app.set_version_flag("--version", version());
  // Parse errors as the commands' own errors say theirs: "kvtier: <command>: <what>".
  app.failure_message([](const CLI::App* top, const CLI::Error& e) {
    std::string where;
    for (const CLI::App* sub : top->get_subcommands()) where += sub->get_name() + ": ";
    return fmt::format("kvtier: {}{}\nRun with --help for more information.\n", where, e.what());
  });
  // Inherited by every subcommand added after it: --help shows each option's default.
  app.option_defaults()->always_capture_default();
  // At most one here; "none" is checked after parsing, so that an unknown subcommand is reported
  // as the unexpected argument it is rather than as a missing subcommand.
  app.require_subcommand(0, 1);
  StoreCommands store;
  store.add_to(app);
  BenchCommand bench;
  bench.add_to(app);
  kvtier::seed::RankArgs rank_args;
  CLI::App* rank_cmd =
      app.add_subcommand("bench-rank", "One rank process of bench --workload seed");
  rank_cmd->group("");  // internal: started by bench
  kvtier::seed::add_rank_flags(*rank_cmd, rank_args);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
  } catch (const CLI::ParseError& e) {
    // CLI11 exits 1xx for its own errors; the README promises 2 for any bad argument. --help and
    // --version are ParseErrors too, with exit code 0.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*rank_cmd) return kvtier::seed::run_rank_worker(rank_args);
  if (*bench.cmd) return bench.run(argc, argv);
  const int rc = store.run();
  return rc >= 0 ? rc : 2;
}
