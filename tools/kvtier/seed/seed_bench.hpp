// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// `kvtier bench --workload seed`: the reference evaluation (../shared/reference, "KV cache offload
// ... GPUDirect Storage") on this machine. Per chunk size: a unique phase (each session's KV made
// by the prefill stand-in and saved), then per configuration a repeat phase restoring every session
// into a poisoned paged KV cache with the page cache dropped, each restore's window measured by
// kernel counters at its exact edges; medians over the repeat windows; Table 1, JSON, CSV, and
// (through seed_report.py) Figures 1-5 and a report.
#pragma once

#include <cstdint>
#include <string>

#include "cli_common.hpp"

namespace kvtier::seed {

struct SeedFlags {
  uint64_t sessions = 20;
  uint64_t tokens_min = 98058;
  uint64_t tokens_max = 100022;
  uint64_t seed = 1;
  uint32_t ranks = 2;         // tensor-parallel world: one process per rank
  std::string restore_ranks;  // e.g. "1,4,8": TP sizes that restore what `ranks` saved
  std::string paths = "posix,gds,dram,buffered";
  std::string chunk_sweep;  // extra chunk sizes, e.g. "64,1024"
  std::string sweep_paths = "posix,gds";
  std::string device = "auto";      // auto, cuda, host
  std::string kv = "random";        // random, bf16-like (compressible) or file:PATH (kv_source.hpp)
  std::string dram_bytes = "auto";  // per rank
  std::string out;                  // output directory
  bool keep = false;
  bool report = true;                  // run seed_report.py for figures and report.md
  std::string concurrency;             // e.g. "1,2,4,8,16": the concurrency workload instead
  unsigned host_load = 0;              // threads of background memory load (0: none)
  std::string fio = "fio";             // the independent ceiling's tool; "off": none
  unsigned fio_depth = 0;              // 0: calibrated on the first session
  std::vector<uint64_t> fio_requests;  // request sizes fio also tries on the first session
};

/// `self` is the kvtier executable (started again for each rank).
int run_seed_bench(const std::string& self, cli::StoreFlags store, const SeedFlags& flags,
                   const std::string& command_line);

}  // namespace kvtier::seed
