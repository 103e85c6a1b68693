// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's per-request rows turned into medians per configuration (Table 1), the
// table and CSV renderings, and the report (figures and report.md) made from them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtier/status.hpp"

namespace kvtier::seed {

/// Per (config, chunk): medians over the repeat windows, plus the unique phase's save figures.
/// Rates are medians of per-window rates (each window's bytes over its own length).
[[nodiscard]] nlohmann::ordered_json summarize(const std::vector<nlohmann::ordered_json>& rows);

/// One line that says where the KV went: the GPUs by name, or the host-emulated device (no GPU
/// used), from `machine` ({"gpu": bool, "rank_devices": [...]}, as seed.json's "machine").
[[nodiscard]] std::string device_headline(const nlohmann::ordered_json& machine);

/// Table 1 in the reference's columns plus kvtier's: restore GB/s, ratio to the drive's ceiling
/// measured by fio in the same run (`fio`: seed.json's "fio"), ratio to kvtier's own raw read of
/// the same records (attribution), accounted host bytes per KV byte, byte-exact count. Headed by
/// device_headline(machine); `machine["samplers"]` says what was measured.
[[nodiscard]] std::string render_table(
    const nlohmann::ordered_json& summary, const nlohmann::ordered_json& machine,
    const std::map<std::string, std::string>& cufile,
    const nlohmann::ordered_json& fio = nlohmann::ordered_json::object());

/// Per (config, concurrency N): aggregate restore GB/s (all sessions of a round over its window),
/// the drive's ceiling for the same sessions read raw at once, p50 and p99 session latency over
/// every restore of that level, CPU per restore, accounted host bytes, and the background load's
/// bandwidth during the windows against `load_alone_gbps` (0: no load ran).
[[nodiscard]] nlohmann::ordered_json summarize_concurrency(
    const std::vector<nlohmann::ordered_json>& rows, double load_alone_gbps);
[[nodiscard]] std::string render_concurrency_table(
    const nlohmann::ordered_json& summary, const nlohmann::ordered_json& machine,
    const std::map<std::string, std::string>& cufile);

/// The p-quantile (0..1) of `values`, interpolating between neighbours; 0 for none.
[[nodiscard]] double quantile(std::vector<double> values, double p);

/// One line per request; columns are the union of the rows' keys, in first-seen order.
void write_csv(const std::vector<nlohmann::ordered_json>& rows, const std::string& path);

enum class ReportOutcome { kMade, kNoScript, kNoMatplotlib, kFailed };

/// Runs seed_report.py on a run directory: figures and report.md from its seed.json and table.md,
/// with the first python3 that has matplotlib. Prints why when it makes none.
[[nodiscard]] ReportOutcome make_report(const std::string& run_dir);

/// The store device's model as the kernel lists it (`sys`: the sysfs root), else "unknown (why)":
/// virtual and device-mapper disks list none, and an empty model line reads as a bug.
[[nodiscard]] std::string store_device_model(const Result<std::string>& device,
                                             const std::string& sys = "/sys");

}  // namespace kvtier::seed
