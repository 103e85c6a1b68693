// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/export.hpp"

namespace kvtier {

/// @brief Latency of one kind of operation: counts in fixed buckets (upper bounds in seconds,
/// cumulative as Prometheus histograms are), their number and sum.
struct LatencyHistogram {
  static constexpr std::array<double, 14> kBounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  std::array<uint64_t, kBounds.size()> cumulative{};  ///< operations that took <= kBounds[i]
  uint64_t count = 0;
  double sum_seconds = 0;
};

/// @brief Counters of one engine since it was opened, plus the state of its store.
struct Stats {
  std::string io_engine;    ///< I/O engine actually in use, e.g. "io_uring+O_DIRECT".
  std::string io_fallback;  ///< Why the requested path was not used; empty when it was.
  /// GPUDirect Storage for restores into CUDA memory: "GPUDirect Storage peer-to-peer (...)",
  /// "cuFile compat mode: ..." (never counted as GDS), or why cuFile is not used. Empty until the
  /// first restore into CUDA memory.
  std::string gds;
  uint64_t gds_restores = 0;  ///< Restores read through cuFile.
  uint64_t gds_saves = 0;     ///< Saves from GPU memory written through cuFile.
  /// cuFile's own counts of how it served this process (peer-to-peer, nvidia-fs, POSIX), from its
  /// statistics API where the library has one; empty while cuFile is not in use.
  std::string gds_io_counts;
  uint64_t dram_hits = 0;   ///< Records restored from the DRAM tier.
  uint64_t store_hits = 0;  ///< Records restored from the local store (disk), verified.
  /// Records a restore asked for that were not served: past the stored prefix, corrupt, or not
  /// read (an I/O error); the caller recomputes them.
  uint64_t restore_misses = 0;
  uint64_t dram_records = 0;  ///< Records the DRAM tier holds now.
  uint64_t capacity_bytes = 0;
  uint64_t segment_bytes = 0;
  uint64_t used_bytes = 0;  ///< Bytes of segment files on disk (preallocated).
  uint64_t live_bytes = 0;  ///< Bytes of live records (headers and padding included).
  uint64_t segments = 0;
  uint64_t records = 0;
  uint64_t saves = 0;
  uint64_t chunks_written = 0;
  uint64_t bytes_written = 0;
  uint64_t lookups = 0;
  uint64_t lookup_hit_tokens = 0;
  uint64_t restores = 0;
  uint64_t bytes_restored = 0;
  uint64_t tokens_restored = 0;
  uint64_t checksum_misses = 0;  ///< Records found corrupt (and dropped).
  /// Re-read before drop: a record that fails a check on a restore or verify is read once more
  /// through the page cache and verified on the host before it is dropped. Kept: it verified (the
  /// first read's data path failed it). Dropped: it failed twice (also in checksum_misses).
  uint64_t recheck_kept = 0;
  uint64_t recheck_dropped = 0;
  /// Host memory traffic of the data path, accounted from what it moves (not a hardware counter):
  /// bytes read from storage into host staging, and bytes copied between staging and a device.
  uint64_t staging_bytes_read = 0;
  uint64_t device_copy_bytes = 0;
  /// Host memory traffic of all restores, accounted per path (RestoreResult::host_bytes).
  uint64_t restore_host_bytes = 0;
  uint64_t evicted_segments = 0;   ///< Segments evicted to stay under capacity.
  uint64_t evicted_records = 0;    ///< Records dropped by eviction, evict() or corruption.
  uint64_t recovered_records = 0;  ///< Records loaded from the index at open.
  uint64_t dropped_at_open = 0;  ///< Index entries dropped at open (missing or truncated segment).
  uint64_t fallbacks =
      0;  ///< Operations that took another I/O path than asked (io_fallback says why).
  /// Remote tier (Options::remote): "off", "ok", or why the last remote operation failed, e.g.
  /// "unreachable: ..." (the engine then runs local-only and retries now and then).
  std::string remote;
  uint64_t remote_hits = 0;    ///< Records restored from the cluster, verified where they landed.
  uint64_t remote_absent = 0;  ///< Records asked of the cluster that it did not hold.
  /// Records the cluster could not be asked for (timeout, failover, unreachable): misses.
  uint64_t remote_errors = 0;
  /// Values from the cluster that failed a check (header, size, geometry, checksum): misses.
  uint64_t remote_rejected = 0;
  uint64_t remote_writes = 0;  ///< Records written to the cluster (behind saves, and by sync).
  uint64_t remote_write_drops =
      0;  ///< Records not written behind or not promoted: the queue was full.
  uint64_t remote_write_errors = 0;  ///< Records whose write to the cluster failed.
  uint64_t remote_promoted = 0;      ///< Remote hits copied into the local store.
  /// Records queued for the cluster (write-behind) or for the local store (promotion), the one in
  /// progress included: 0 once every save so far has reached the cluster or been counted as a drop
  /// or an error.
  uint64_t remote_pending = 0;
  uint64_t drives = 0;          ///< Drives the store spans (1 for a one-directory store).
  uint64_t drives_offline = 0;  ///< Drives of the store missing or unreadable since open.
  /// Drives whose records are served but that take no new segments until the store reopens:
  /// read-only at open, or a segment could not be made or kept there since (drive_problem says
  /// why). Saves go to the other drives.
  uint64_t drives_out_of_placement = 0;
  uint64_t offline_records =
      0;                      ///< Records on missing drives: kept in the index, misses until back.
  uint64_t drive_misses = 0;  ///< Lookups and restores stopped at a record on a missing drive.
  std::string drive_problem;  ///< Why drives are offline or take no new segments; empty if none.
  LatencyHistogram restore_latency;  ///< Restores, from the call to all KV in place and verified.
  LatencyHistogram save_latency;     ///< Saves, from the call to durable.
};

/// @brief One field of Stats, described once: the list the CLI (text, JSON, Prometheus), the
/// Python module and the metrics iterate, so no consumer keeps its own copy of the field names.
struct StatField {
  enum class Kind : uint8_t { kCounter, kGauge, kText, kHistogram };
  std::string_view name;  ///< snake_case key (JSON, Python); Prometheus: kvtier_<name>[_total]
  Kind kind;
  std::string_view help;
  uint64_t Stats::*number = nullptr;             ///< kCounter, kGauge
  std::string Stats::*text = nullptr;            ///< kText
  LatencyHistogram Stats::*histogram = nullptr;  ///< kHistogram
};

/// Every field of Stats, in declaration order.
[[nodiscard]] KVTIER_EXPORT std::span<const StatField> stat_fields();

/// Stats in the Prometheus text exposition format (version 0.0.4): counters as kvtier_<name>_total,
/// gauges as kvtier_<name>, histograms as kvtier_<name>_seconds, text fields as kvtier_info labels.
/// `labels` (e.g. `store="/nvme/kv",rank="0"`, already escaped) is added to every sample.
[[nodiscard]] KVTIER_EXPORT std::string prometheus_text(const Stats& stats,
                                                        std::string_view labels = {});

/// Escapes a Prometheus label value (backslash, double quote, newline).
[[nodiscard]] KVTIER_EXPORT std::string prometheus_label_value(std::string_view value);

struct SegmentInfo {
  uint32_t id = 0;
  uint64_t file_bytes = 0;
  uint64_t write_offset = 0;
  uint64_t live_bytes = 0;
  uint64_t records = 0;
  uint64_t tokens = 0;
};

struct VerifyReport {
  uint64_t records_checked = 0;
  uint64_t bytes_checked = 0;
  uint64_t corrupt_records = 0;  ///< Found corrupt and dropped from the index.
  std::vector<std::string> problems;
};

/// Progress of long work: done and total units (bytes or records).
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

}  // namespace kvtier
