// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Host DRAM traffic measured by the memory controllers (Intel uncore IMC CAS counters through
// perf_event_open), where the machine exposes them. Where it does not (most VMs), benchmarks report
// the data path's accounted bytes instead, labeled as such.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "kvtier/status.hpp"

namespace kvtier::metrics {

/// The bits of `config` a PMU format field occupies, from sysfs `format/<field>` ("config:0-7",
/// "config:8-15,32-35", "config:21").
using PmuFormat = std::map<std::string, std::string>;

/// Encodes a sysfs event spec ("event=0x04,umask=0x03") into perf_event_attr.config under `format`.
/// kInvalidArgument for an unknown field, a value that does not fit, or a field outside "config".
[[nodiscard]] Result<uint64_t> encode_pmu_event(std::string_view spec, const PmuFormat& format);

/// @brief Memory-controller read + write counters of every IMC of the machine.
class MemoryTraffic {
 public:
  /// Opens the counters under `sysfs` (/sys/bus/event_source/devices); kNotSupported with the
  /// reason where there are no IMC PMUs or perf_event_open is refused (perf_event_paranoid, no
  /// CAP_PERFMON).
  [[nodiscard]] static Result<std::unique_ptr<MemoryTraffic>> open(
      const std::string& sysfs = "/sys/bus/event_source/devices");
  virtual ~MemoryTraffic() = default;
  /// Bytes read and written by the memory controllers since open().
  [[nodiscard]] virtual Result<double> bytes() = 0;
  [[nodiscard]] virtual std::string source() const = 0;
};

}  // namespace kvtier::metrics
