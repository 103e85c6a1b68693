// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Stats' field table, made from the one list of its fields (KVTIER_STATS_FIELDS), and the
// Prometheus exposition built from it.
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

#define KVTIER_STAT_FIELD_(kind, keeper, name, help) kind(#name, &Stats::name, help),
constexpr StatField kFields[] = {KVTIER_STATS_FIELDS(KVTIER_STAT_FIELD_)};
#undef KVTIER_STAT_FIELD_

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
