// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// One tensor-parallel rank of the seed benchmark, run as its own process (`kvtier bench-rank`,
// started by `kvtier bench --workload seed`): it owns the rank's store and paged KV cache and
// answers one JSON command per line on stdin with one JSON line on stdout.
//
// Commands: {"op":"open","path":P,"dram_bytes":N}  {"op":"prefill_save","seed":S,"tokens":T}
// {"op":"poison"}  {"op":"drop"}  {"op":"restore","seed":S,"tokens":T}  {"op":"check",...}
// {"op":"ceiling",...}  {"op":"warm",...}  {"op":"quit"}. Every reply has "ok" and, when not ok,
// "error".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_common.hpp"

namespace kvtier::seed {

struct RankArgs {
  cli::StoreFlags store;    // root, model, rank, world, chunk, sizes
  uint64_t max_tokens = 0;  // capacity of the paged KV cache
  std::string device = "auto";
  int gpu = 0;
  std::string kv = "random";  ///< random, bf16-like or file:PATH (kv_source.hpp)
};

/// Adds the hidden `bench-rank` subcommand's flags.
void add_rank_flags(CLI::App& cmd, RankArgs& args);
/// The command line that starts the rank `args` describes (`self` is this executable): the
/// flags add_rank_flags reads, the remote tier's only where `args.store.remote` names one.
std::vector<std::string> rank_command(const std::string& self, const RankArgs& args);

int run_rank_worker(const RankArgs& args);

}  // namespace kvtier::seed
