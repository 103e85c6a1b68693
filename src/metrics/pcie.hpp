// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// PCIe bytes received by GPUs, from NVML loaded at run time (libnvidia-ml.so.1): nothing here needs
// NVML to build or to run on a machine without it.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtier/status.hpp"
#include "metrics/counters.hpp"

namespace kvtier::metrics {

/// A counter that may wrap at `modulus` (a power of two), sampled in order: the running total of
/// its increments, assuming it wrapped at most once between two samples.
class UnwrappedCounter {
 public:
  explicit UnwrappedCounter(uint64_t modulus_log2) : bits_(modulus_log2) {}
  /// Adds a raw reading; returns the total so far.
  double add(uint64_t raw);

 private:
  unsigned bits_;
  bool first_ = true;
  uint64_t last_ = 0;
  double total_ = 0;
};

/// @brief Samples the PCIe receive counters of some GPUs on a thread, every `period`, until
/// destroyed. Prefers NVML's cumulative byte counter (field NVML_FI_DEV_PCIE_COUNT_RX_BYTES); where
/// the driver lacks it, integrates nvmlDeviceGetPcieThroughput's rate (20 ms windows) instead and
/// says so in source().
class PcieRxSampler {
 public:
  /// `pci_bus_ids` as cudaDeviceGetPCIBusId writes them (duplicates are sampled once).
  /// kNotSupported, with the reason, where NVML or a GPU cannot be opened.
  [[nodiscard]] static Result<std::unique_ptr<PcieRxSampler>> start(
      std::vector<std::string> pci_bus_ids, std::chrono::microseconds period);
  virtual ~PcieRxSampler() = default;
  /// What the samples come from, for reports.
  [[nodiscard]] virtual std::string source() const = 0;
  /// Bytes received by all the GPUs in [t0, t1] (seconds of steady_clock since its epoch).
  [[nodiscard]] virtual Result<double> bytes_in_window(double t0, double t1) const = 0;
  /// Median interval between samples so far, in seconds.
  [[nodiscard]] virtual double sample_interval() const = 0;
};

/// Seconds of steady_clock since its epoch: the time base of samplers and windows.
double steady_seconds();

}  // namespace kvtier::metrics
