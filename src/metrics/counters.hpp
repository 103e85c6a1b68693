// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Kernel counters read at the exact edges of a measured window (so nothing needs clipping), and the
// helpers to turn samples into per-window figures: /proc/diskstats for the device under a path,
// /proc/stat for machine CPU, /proc/self/stat for this process's CPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier::metrics {

/// One block device's cumulative I/O counters (/proc/diskstats; sectors are 512 bytes).
struct DiskCounters {
  uint64_t reads = 0;
  uint64_t sectors_read = 0;
  uint64_t writes = 0;
  uint64_t sectors_written = 0;
  [[nodiscard]] uint64_t bytes_read() const { return sectors_read * 512; }
  [[nodiscard]] uint64_t bytes_written() const { return sectors_written * 512; }
};

/// Counters of `device` (e.g. "vda", "nvme0n1") in the text of /proc/diskstats.
[[nodiscard]] Result<DiskCounters> parse_diskstats(std::string_view text, std::string_view device);

/// The whole-disk block device holding `path` (a partition maps to its disk), from /sys/dev/block.
[[nodiscard]] Result<std::string> block_device_of(const std::string& path);

/// Machine CPU time from the "cpu" line of /proc/stat, in clock ticks.
struct CpuCounters {
  uint64_t busy = 0;   ///< user + nice + system + irq + softirq + steal
  uint64_t total = 0;  ///< busy + idle + iowait
};
[[nodiscard]] Result<CpuCounters> parse_proc_stat(std::string_view text);

/// utime + stime of a process from the text of /proc/<pid>/stat, in clock ticks.
[[nodiscard]] Result<uint64_t> parse_process_ticks(std::string_view text);

/// A counter sampled over time.
struct Sample {
  double t = 0;      ///< seconds
  double value = 0;  ///< cumulative counter
};

/// How much the counter grew inside [t0, t1], interpolating linearly between the samples around
/// each edge. kInvalidArgument when the samples do not cover the window or go back in time.
[[nodiscard]] Result<double> delta_in_window(std::span<const Sample> samples, double t0, double t1);

/// Median (mean of the middle two for an even count); kInvalidArgument for no values.
[[nodiscard]] Result<double> median(std::vector<double> values);

}  // namespace kvtier::metrics
