// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the seed benchmark reads at the edges of every window: the store drives' /proc/diskstats,
// /proc/stat, the rank processes' CPU time, memory-controller counters where there are some, and
// NVML's PCIe RX counter; and how the page cache is emptied before each request.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/counters.hpp"
#include "metrics/memory_traffic.hpp"
#include "metrics/pcie.hpp"
#include "rank_channel.hpp"

namespace kvtier::seed {

/// Kernel counters at one edge of a window.
struct Edge {
  metrics::DiskCounters disk;  ///< every store drive, summed
  metrics::CpuCounters cpu;
  uint64_t kvtier_ticks = 0;  // this process and every rank process
  std::optional<double> dram_bytes;
};

/// @brief Everything that samples the machine, read at the edges of every window. Not thread-safe.
class Samplers {
 public:
  /// `devices`: the block devices under the store's directories (one per drive; empty names are
  /// skipped); `pids`: the rank processes.
  Samplers(std::vector<std::string> devices, std::vector<pid_t> pids);

  void start_pcie(const std::vector<std::string>& bus_ids);
  Edge read();
  [[nodiscard]] std::optional<double> pcie_bytes(double t0, double t1) const;
  /// Waits until the PCIe sampler has a sample past `t`, so windows ending at t can be clipped.
  void settle() const;
  [[nodiscard]] nlohmann::ordered_json describe() const;

 private:
  std::vector<std::string> devices_;
  std::vector<pid_t> pids_;
  std::unique_ptr<metrics::MemoryTraffic> memory_;
  std::string memory_note_;
  std::unique_ptr<metrics::PcieRxSampler> pcie_;
  std::string pcie_note_;
};

/// @brief How the page cache is emptied before each request: drop_caches as root, else the ranks
/// fadvise their store files.
class CacheDropper {
 public:
  CacheDropper();
  [[nodiscard]] Status drop(std::vector<std::unique_ptr<RankChannel>>& ranks);
  [[nodiscard]] std::string describe() const;

 private:
  bool global_ = false;
};

}  // namespace kvtier::seed
