// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's per-request rows turned into medians per configuration (Table 1), and the
// table and CSV renderings.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier::seed {

/// Per (config, chunk): medians over the repeat windows, plus the unique phase's save figures.
/// Rates are medians of per-window rates (each window's bytes over its own length).
[[nodiscard]] nlohmann::ordered_json summarize(const std::vector<nlohmann::ordered_json>& rows);

/// Table 1 in the reference's columns plus kvtier's: restore GB/s, ratio to the drive's O_DIRECT
/// ceiling measured in the same run, accounted host bytes per KV byte, byte-exact count.
[[nodiscard]] std::string render_table(const nlohmann::ordered_json& summary, const nlohmann::ordered_json& samplers,
                                       const std::map<std::string, std::string>& cufile);

/// One line per request; columns are the union of the rows' keys, in first-seen order.
void write_csv(const std::vector<nlohmann::ordered_json>& rows, const std::string& path);

}  // namespace kvtier::seed
