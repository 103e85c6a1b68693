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

/// @brief Every field of Stats, once, in order: `X(kind, keeper, name, help)` for each. Stats, its
/// field table (stat_fields()) and the counters the engine keeps are all made from this list, so a
/// new field is one line here.
/// - kind: `counter` (only grows; Prometheus `kvtier_<name>_total`), `gauge` (a level now), `text`
///   (a label of `kvtier_info`) or `histogram` (a LatencyHistogram, `kvtier_<name>_seconds`).
/// - keeper: the part of the engine that keeps the value: `engine` (its own counters), `path` (the
///   data path), `dram` (the DRAM tier), `store` or `remote` (the remote tier).
/// - help: one line, also Prometheus' HELP.
// clang-format off
#define KVTIER_STATS_FIELDS(X)                                                                     \
  /* The I/O engine actually in use, e.g. "io_uring+O_DIRECT". */                                  \
  X(text, path, io_engine, "I/O engine in use")                                                    \
  X(text, path, io_fallback, "why the requested I/O path was not used (empty: it was)")            \
  /* For restores into CUDA memory: "GPUDirect Storage peer-to-peer (...)", "cuFile compat mode:   \
     ..." (never counted as GDS), or why cuFile is not used. Empty until the first restore into    \
     CUDA memory. */                                                                               \
  X(text, path, gds, "GPUDirect Storage: peer-to-peer, cuFile compat mode, or why not used")       \
  X(counter, engine, gds_restores, "restores read through cuFile")                                 \
  X(counter, engine, gds_saves, "saves from GPU memory written through cuFile")                    \
  /* From cuFile's statistics API (peer-to-peer, nvidia-fs, POSIX) where cuFile's configuration  \
     collects them (profile.cufile_stats 3); empty while cuFile is not in use. */                  \
  X(text, path, gds_io_counts, "cuFile's own counts of how it served this process")                \
  X(counter, engine, dram_hits, "records restored from the DRAM tier")                             \
  X(counter, engine, store_hits, "records restored from the local store, verified")                \
  /* Past the stored prefix, corrupt, or not read (an I/O error): the caller recomputes them. */   \
  X(counter, engine, restore_misses,                                                               \
    "records a restore asked for and did not serve (not stored, corrupt or unread)")               \
  X(gauge, dram, dram_records, "records the DRAM tier holds")                                      \
  X(gauge, store, capacity_bytes, "bound on the bytes of the store")                               \
  X(gauge, store, segment_bytes, "size of one segment file")                                       \
  /* Segment files are preallocated; live records count their headers and padding. */              \
  X(gauge, store, used_bytes, "bytes of segment files on disk")                                    \
  X(gauge, store, live_bytes, "bytes of live records")                                             \
  X(gauge, store, segments, "segment files")                                                       \
  X(gauge, store, records, "records in the store")                                                 \
  X(counter, engine, saves, "save calls")                                                          \
  X(counter, engine, chunks_written, "records written")                                            \
  X(counter, engine, bytes_written, "payload bytes written")                                       \
  /* With Options::compression: the KV bytes those payloads hold, and how many were kept coded. */  \
  X(counter, engine, kv_bytes_written, "KV bytes of the records written, before coding")         \
  X(counter, engine, coded_records_written, "records written coded (Options::compression)")      \
  X(counter, engine, lookups, "lookup calls")                                                      \
  X(counter, engine, lookup_hit_tokens, "tokens found by lookups")                                 \
  X(counter, engine, restores, "restore calls")                                                    \
  X(counter, engine, bytes_restored, "KV bytes restored, verified")                                \
  X(counter, engine, tokens_restored, "tokens restored, verified")                                 \
  X(counter, engine, checksum_misses, "records found corrupt and dropped")                         \
  /* Re-read before drop: a record that fails a check on a restore or verify is read once more     \
     through the page cache and verified on the host before it is dropped. Kept: it verified (the  \
     first read's data path failed it). Dropped: it failed twice (also in checksum_misses). */     \
  X(counter, engine, recheck_kept,                                                                 \
    "records that failed a check on a data path and verified when re-read (kept)")                 \
  X(counter, engine, recheck_dropped, "records that failed a check twice (dropped)")               \
  /* Host memory traffic of the data path, accounted from what it moves (not a hardware counter).  \
     restore_host_bytes: that of all restores, accounted per path (RestoreResult::host_bytes). */  \
  X(counter, engine, staging_bytes_read, "bytes read from storage into host staging")              \
  X(counter, engine, device_copy_bytes, "bytes copied between staging and a device")               \
  X(counter, engine, restore_host_bytes, "host memory traffic of restores (accounted)")            \
  /* Where the staging slots of reads from the drives (restores, verifies, moves between tiers)    \
     spent their time, in nanoseconds summed over slots: read_slot_ns is slots x the reads' time;  \
     of it, a request in flight, read and waiting for a consumer thread, consumed (headers checked,\
     copies queued), waiting for the slot's copy to the device, and waiting to be refilled. The    \
     rest the slots sat idle (before their first piece, after their last, handed to another      \
     operation). A drive read fully busy shows in reading; a slow consumer or device elsewhere.  */ \
  X(counter, engine, read_slot_ns, "staging slot time of reads (slots x their time), ns")          \
  X(counter, engine, read_slot_reading_ns, "slot time with a read in flight, ns")                  \
  X(counter, engine, read_slot_queued_ns, "slot time read and waiting for a consumer thread, ns")  \
  X(counter, engine, read_slot_consuming_ns, "slot time being consumed, ns")                       \
  X(counter, engine, read_slot_device_wait_ns, "slot time waiting for its copy to a device, ns")   \
  X(counter, engine, read_slot_refill_wait_ns, "slot time waiting to be refilled, ns")             \
  X(counter, store, evicted_segments, "segments evicted to stay under capacity")                   \
  X(counter, store, evicted_records, "records dropped by eviction, evict() or corruption")         \
  X(gauge, store, recovered_records, "records loaded from the index at open")                      \
  /* Dropped at open: the entry's segment is missing or truncated. */                              \
  X(gauge, store, dropped_at_open, "index entries dropped at open")                                \
  /* io_fallback says why. */                                                                      \
  X(counter, path, fallbacks, "operations that took another I/O path than asked")                  \
  /* Options::remote: "off", "ok", or why the last remote operation failed, e.g. "unreachable:     \
     ..." (the engine then runs local-only and retries now and then). */                           \
  X(text, remote, remote, "remote tier: off, ok, or why the last remote operation failed")         \
  /* Hits are verified where they landed; errors and rejected values (header, size, geometry,      \
     checksum) are misses. */                                                                      \
  X(counter, remote, remote_hits, "records restored from the cluster, verified")                   \
  X(counter, remote, remote_absent, "records asked of the cluster that it did not hold")           \
  /* Asked by size (STRLEN), never for values: what finding a prompt's boundary costs the        \
     cluster (lookups, and restores that search again). */                                        \
  X(counter, remote, remote_probes, "keys asked of the cluster by size to find how far it holds")  \
  X(counter, remote, remote_errors,                                                                \
    "records the cluster could not be asked for (timeout, failover, unreachable)")                 \
  X(counter, remote, remote_rejected, "values from the cluster that failed a check")               \
  X(counter, remote, remote_writes, "records written to the cluster (behind saves, and by sync)")  \
  X(counter, remote, remote_write_drops, "records not written behind or not promoted: queue full") \
  X(counter, remote, remote_write_errors, "records whose write to the cluster failed")             \
  X(counter, remote, remote_promoted, "remote hits copied into the local store")                   \
  /* Queued for the cluster (write-behind) or for the local store (promotion), the one in progress \
     included: 0 once every save so far has reached the cluster or been counted as a drop or an    \
     error. */                                                                                     \
  X(gauge, remote, remote_pending, "records waiting to be written to the cluster or promoted")     \
  /* 1 for a one-directory store. */                                                               \
  X(gauge, store, drives, "drives the store spans")                                                \
  X(gauge, store, drives_offline, "drives of the store missing or unreadable since open")          \
  /* Served, but taking no new segments until the store reopens: read-only at open, or a segment   \
     could not be made or kept there since (drive_problem says why). Saves go to the other         \
     drives. */                                                                                    \
  X(gauge, store, drives_out_of_placement,                                                         \
    "drives read from but taking no new segments (read-only, gone or failing)")                    \
  /* Kept in the index: misses until the drive is back. */                                         \
  X(gauge, store, offline_records, "records on missing drives (misses until back)")                \
  X(counter, store, drive_misses, "lookups and restores stopped at a record on a missing drive")   \
  X(text, store, drive_problem, "why drives are offline or take no new segments")                  \
  /* From the call to all KV in place and verified; from the call to durable. */                   \
  X(histogram, engine, restore_latency, "restore latency")                                         \
  X(histogram, engine, save_latency, "save latency")
// clang-format on

/// @brief Counters of one engine since it was opened, plus the state of its store: one member per
/// line of KVTIER_STATS_FIELDS, of its kind's type (uint64_t for counters and gauges, std::string,
/// LatencyHistogram), zero or empty to begin with.
struct Stats {
#define KVTIER_STATS_TYPE_counter_ uint64_t
#define KVTIER_STATS_TYPE_gauge_ uint64_t
#define KVTIER_STATS_TYPE_text_ std::string
#define KVTIER_STATS_TYPE_histogram_ LatencyHistogram
#define KVTIER_STATS_MEMBER_(kind, keeper, name, help) KVTIER_STATS_TYPE_##kind##_ name{};
  KVTIER_STATS_FIELDS(KVTIER_STATS_MEMBER_)
#undef KVTIER_STATS_MEMBER_
#undef KVTIER_STATS_TYPE_histogram_
#undef KVTIER_STATS_TYPE_text_
#undef KVTIER_STATS_TYPE_gauge_
#undef KVTIER_STATS_TYPE_counter_
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

/// Every field of Stats, in declaration order (KVTIER_STATS_FIELDS).
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
  /// Its drive: 0 is the home drive (holding the index), the others numbered in the order this
  /// open listed them.
  uint32_t drive = 0;
  std::string dir;  ///< the directory holding its file (the drive's directory of this store)
};

/// How one drive of the store is read, as kvtier's read probe found (docs/options.md "Tuning").
struct DriveTuningInfo {
  /// The store's directory on the drive (its rank or head-group directory); the tuning lies one
  /// level up (the root beside the rank directories; a TP-free store's model directory).
  std::string dir;
  uint64_t request_bytes = 0;  ///< 0: not tuned
  uint32_t in_flight = 0;
  double bytes_per_second = 0;  ///< what the probe measured for that pattern
  std::string state;            ///< "probed", "kept" (an earlier probe's), or why it is not tuned
};

/// The request size and staging an engine reads and writes with, and where they came from.
struct IoSettings {
  uint64_t request_bytes = 0;
  uint64_t staging_bytes = 0;
  std::string source;  ///< "options", "environment", "tuned", "defaults"
  std::vector<DriveTuningInfo> drives;
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
