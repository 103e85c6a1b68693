// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one description of Stats' fields, and the Prometheus exposition built from it.
#include <fmt/format.h>

#include "kvtier/stats.hpp"

namespace kvtier {
namespace {

using K = StatField::Kind;

constexpr StatField counter(std::string_view name, uint64_t Stats::*m, std::string_view help) {
  return {name, K::kCounter, help, m, nullptr, nullptr};
}
constexpr StatField gauge(std::string_view name, uint64_t Stats::*m, std::string_view help) {
  return {name, K::kGauge, help, m, nullptr, nullptr};
}
constexpr StatField text(std::string_view name, std::string Stats::*m, std::string_view help) {
  return {name, K::kText, help, nullptr, m, nullptr};
}
constexpr StatField histogram(std::string_view name, LatencyHistogram Stats::*m,
                              std::string_view help) {
  return {name, K::kHistogram, help, nullptr, nullptr, m};
}

constexpr StatField kFields[] = {
    text("io_engine", &Stats::io_engine, "I/O engine in use"),
    text("io_fallback", &Stats::io_fallback,
         "why the requested I/O path was not used (empty: it was)"),
    text("gds", &Stats::gds,
         "GPUDirect Storage: peer-to-peer, cuFile compat mode, or why not used"),
    counter("gds_restores", &Stats::gds_restores, "restores read through cuFile"),
    counter("gds_saves", &Stats::gds_saves, "saves from GPU memory written through cuFile"),
    text("gds_io_counts", &Stats::gds_io_counts,
         "cuFile's own counts of how it served this process"),
    counter("dram_hits", &Stats::dram_hits, "records restored from the DRAM tier"),
    counter("store_hits", &Stats::store_hits, "records restored from the local store, verified"),
    counter("restore_misses", &Stats::restore_misses,
            "records a restore asked for and did not serve (not stored, corrupt or unread)"),
    gauge("dram_records", &Stats::dram_records, "records the DRAM tier holds"),
    gauge("capacity_bytes", &Stats::capacity_bytes, "bound on the bytes of the store"),
    gauge("segment_bytes", &Stats::segment_bytes, "size of one segment file"),
    gauge("used_bytes", &Stats::used_bytes, "bytes of segment files on disk"),
    gauge("live_bytes", &Stats::live_bytes, "bytes of live records"),
    gauge("segments", &Stats::segments, "segment files"),
    gauge("records", &Stats::records, "records in the store"),
    counter("saves", &Stats::saves, "save calls"),
    counter("chunks_written", &Stats::chunks_written, "records written"),
    counter("bytes_written", &Stats::bytes_written, "payload bytes written"),
    counter("lookups", &Stats::lookups, "lookup calls"),
    counter("lookup_hit_tokens", &Stats::lookup_hit_tokens, "tokens found by lookups"),
    counter("restores", &Stats::restores, "restore calls"),
    counter("bytes_restored", &Stats::bytes_restored, "KV bytes restored, verified"),
    counter("tokens_restored", &Stats::tokens_restored, "tokens restored, verified"),
    counter("checksum_misses", &Stats::checksum_misses, "records found corrupt and dropped"),
    counter("recheck_kept", &Stats::recheck_kept,
            "records that failed a check on a data path and verified when re-read (kept)"),
    counter("recheck_dropped", &Stats::recheck_dropped,
            "records that failed a check twice (dropped)"),
    counter("staging_bytes_read", &Stats::staging_bytes_read,
            "bytes read from storage into host staging"),
    counter("device_copy_bytes", &Stats::device_copy_bytes,
            "bytes copied between staging and a device"),
    counter("restore_host_bytes", &Stats::restore_host_bytes,
            "host memory traffic of restores (accounted)"),
    counter("evicted_segments", &Stats::evicted_segments,
            "segments evicted to stay under capacity"),
    counter("evicted_records", &Stats::evicted_records,
            "records dropped by eviction, evict() or corruption"),
    gauge("recovered_records", &Stats::recovered_records, "records loaded from the index at open"),
    gauge("dropped_at_open", &Stats::dropped_at_open, "index entries dropped at open"),
    counter("fallbacks", &Stats::fallbacks, "operations that took another I/O path than asked"),
    text("remote", &Stats::remote, "remote tier: off, ok, or why the last remote operation failed"),
    counter("remote_hits", &Stats::remote_hits, "records restored from the cluster, verified"),
    counter("remote_absent", &Stats::remote_absent,
            "records asked of the cluster that it did not hold"),
    counter("remote_errors", &Stats::remote_errors,
            "records the cluster could not be asked for (timeout, failover, unreachable)"),
    counter("remote_rejected", &Stats::remote_rejected,
            "values from the cluster that failed a check"),
    counter("remote_writes", &Stats::remote_writes,
            "records written to the cluster (behind saves, and by sync)"),
    counter("remote_write_drops", &Stats::remote_write_drops,
            "records not written behind or not promoted: queue full"),
    counter("remote_write_errors", &Stats::remote_write_errors,
            "records whose write to the cluster failed"),
    counter("remote_promoted", &Stats::remote_promoted, "remote hits copied into the local store"),
    gauge("remote_pending", &Stats::remote_pending,
          "records waiting to be written to the cluster or promoted"),
    gauge("drives", &Stats::drives, "drives the store spans"),
    gauge("drives_offline", &Stats::drives_offline,
          "drives of the store missing or unreadable since open"),
    gauge("drives_out_of_placement", &Stats::drives_out_of_placement,
          "drives read from but taking no new segments (read-only, gone or failing)"),
    gauge("offline_records", &Stats::offline_records,
          "records on missing drives (misses until back)"),
    counter("drive_misses", &Stats::drive_misses,
            "lookups and restores stopped at a record on a missing drive"),
    text("drive_problem", &Stats::drive_problem, "why drives are offline or take no new segments"),
    histogram("restore_latency", &Stats::restore_latency, "restore latency"),
    histogram("save_latency", &Stats::save_latency, "save latency"),
};

std::string with(std::string_view labels, std::string_view more = {}) {
  if (labels.empty() && more.empty()) return {};
  if (labels.empty()) return fmt::format("{{{}}}", more);
  if (more.empty()) return fmt::format("{{{}}}", labels);
  return fmt::format("{{{},{}}}", labels, more);
}

}  // namespace

std::span<const StatField> stat_fields() { return kFields; }

std::string prometheus_label_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string prometheus_text(const Stats& s, std::string_view labels) {
  std::string out;
  std::string info;
  for (const StatField& f : stat_fields()) {
    switch (f.kind) {
      case K::kCounter:
        out += fmt::format(
            "# HELP kvtier_{0}_total {1}\n# TYPE kvtier_{0}_total counter\nkvtier_{0}_total{2} "
            "{3}\n",
            f.name, f.help, with(labels), s.*f.number);
        break;
      case K::kGauge:
        out += fmt::format("# HELP kvtier_{0} {1}\n# TYPE kvtier_{0} gauge\nkvtier_{0}{2} {3}\n",
                           f.name, f.help, with(labels), s.*f.number);
        break;
      case K::kText:
        info += fmt::format("{}{}=\"{}\"", info.empty() ? "" : ",", f.name,
                            prometheus_label_value(s.*f.text));
        break;
      case K::kHistogram: {
        const LatencyHistogram& h = s.*f.histogram;
        out += fmt::format("# HELP kvtier_{0}_seconds {1}\n# TYPE kvtier_{0}_seconds histogram\n",
                           f.name, f.help);
        for (size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
          out += fmt::format("kvtier_{}_seconds_bucket{} {}\n", f.name,
                             with(labels, fmt::format("le=\"{}\"", LatencyHistogram::kBounds[i])),
                             h.cumulative[i]);
        }
        out += fmt::format(
            "kvtier_{0}_seconds_bucket{1} {2}\nkvtier_{0}_seconds_sum{3} {4}\n"
            "kvtier_{0}_seconds_count{3} {2}\n",
            f.name, with(labels, "le=\"+Inf\""), h.count, with(labels), h.sum_seconds);
        break;
      }
    }
  }
  out += fmt::format(
      "# HELP kvtier_info the engine's I/O paths, as labels\n# TYPE kvtier_info "
      "gauge\nkvtier_info{} 1\n",
      with(labels, info));
  return out;
}

}  // namespace kvtier
