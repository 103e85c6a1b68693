// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "seed_table.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "common/posix.hpp"
#include "metrics/counters.hpp"

#ifndef KVTIER_SEED_REPORT_SCRIPT
#define KVTIER_SEED_REPORT_SCRIPT ""
#endif

namespace kvtier::seed {
namespace {

using Json = nlohmann::ordered_json;

/// Median of f(row) over the rows where f has a value; nullopt when none has.
std::optional<double> median_of(const std::vector<const Json*>& rows,
                                const std::function<std::optional<double>(const Json&)>& f) {
  std::vector<double> v;
  for (const Json* r : rows) {
    if (auto x = f(*r)) v.push_back(*x);
  }
  auto m = metrics::median(std::move(v));
  return m ? std::optional<double>(*m) : std::nullopt;
}

std::optional<double> field(const Json& r, const char* name) {
  if (!r.contains(name) || !r[name].is_number()) return std::nullopt;
  return r[name].get<double>();
}

/// field / seconds of the row's window.
std::function<std::optional<double>(const Json&)> rate(const char* name) {
  return [name](const Json& r) -> std::optional<double> {
    auto v = field(r, name);
    auto s = field(r, "seconds");
    if (!v || !s || *s <= 0) return std::nullopt;
    return *v / *s;
  };
}

void put(Json& out, const char* key, std::optional<double> v, double scale = 1) {
  if (v)
    out[key] = *v * scale;
  else
    out[key] = nullptr;
}

std::string cell(const Json& s, const char* key, const char* format, const char* none = "n/a") {
  if (!s.contains(key) || s[key].is_null()) return none;
  return fmt::format(fmt::runtime(format), s[key].get<double>());
}

using Groups = std::vector<std::pair<std::string, std::vector<const Json*>>>;

/// Rows grouped by key(row), groups in first-seen order; rows whose key is nullopt are left out.
Groups group_rows(const std::vector<Json>& rows,
                  const std::function<std::optional<std::string>(const Json&)>& key) {
  Groups groups;
  for (const Json& r : rows) {
    const auto k = key(r);
    if (!k) continue;
    auto g =
        std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == *k; });
    if (g == groups.end())
      groups.push_back({*k, {&r}});
    else
      g->second.push_back(&r);
  }
  return groups;
}

// Accounted host memory bytes per KV byte restored.
std::optional<double> host_bytes_per_kv_byte(const Json& r) {
  auto h = field(r, "host_bytes_accounted");
  auto k = field(r, "kv_bytes_restored");
  if (!h || !k || *k <= 0) return std::nullopt;
  return *h / *k;
}

// "4952" -> "4,952", as the reference prints milliseconds.
std::string thousands(std::string digits) {
  for (int i = static_cast<int>(digits.size()) - 3;
       i > 0 && std::isdigit(static_cast<unsigned char>(digits[i - 1])); i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return digits;
}

std::string config_name(const Json& s, const std::map<std::string, std::string>& cufile) {
  std::string name = s["config"].get<std::string>();
  if (name != "gds") return name;
  auto it = cufile.find("gds");
  const bool compat = it != cufile.end() && it->second.find("compat") != std::string::npos;
  return !s.value("via_cufile", false) ? "gds (NOT via cuFile: fell back)"
         : compat                      ? "gds (cuFile compat mode)"
                                       : "gds";
}

// A ratio printed as 1.00x is not "above 1x": only one that reads above it gets explained.
constexpr double kAboveOne = 1.005;

/// Why the ratios are what they are. Without this a ratio above 1x reads as a measuring error, and
/// the host-emulated device's dram ratio as a slow DRAM tier.
std::string ratio_notes(const Json& summary, const std::map<std::string, std::string>& cufile,
                        bool gpu) {
  std::string t =
      "RATIO: ceiling time / restore time (median per request; 1.00x: the restore took as long as "
      "the ceiling). "
      "RATIO (FIO) is against fio reading the same file ranges, the independent ceiling; RATIO "
      "(RAW) against kvtier's "
      "own raw read, which only attributes the gap. Each ceiling is a measurement next to each "
      "restore, not a "
      "bound: for posix and gds the raw read is the same records with the same I/O code and as "
      "many reads in "
      "flight (no copy, no checksum, no lookup), timed in its own window, so the drive's variance "
      "between the "
      "windows can put a restore a little above 1x. "
      "buffered cannot read with O_DIRECT and is held against the run's median posix ceiling; its "
      "reads go "
      "through the page cache, whose readahead can beat that ceiling even with the cache dropped "
      "before each "
      "request.\n";
  for (const Json& s : summary) {
    if (s["phase"] != "repeat" || !s["ratio_to_ceiling"].is_number()) continue;
    const double ratio = s["ratio_to_ceiling"].get<double>();
    const std::string name = fmt::format("{} (chunk {}) at {:.2f}x", config_name(s, cufile),
                                         s["chunk_tokens"].get<int>(), ratio);
    if (s["config"] == "dram" && !gpu) {
      t += fmt::format(
          "- {}: on the host-emulated device there is no host-to-device link, so the ceiling is a "
          "one-thread memcpy of the same bytes; the restore copies every byte with the CPU as "
          "well, row "
          "by row into the paged blocks while summing its checksum, so it is bound by that CPU "
          "copy, "
          "not by a link, and says nothing about a GPU's.\n",
          name);
    } else if (ratio >= kAboveOne && s["config"] == "buffered") {
      t += fmt::format(
          "- {}: above 1x because its reads went through the page cache with readahead, faster "
          "here "
          "than the O_DIRECT reads of its ceiling.\n",
          name);
    } else if (ratio >= kAboveOne) {
      t += fmt::format(
          "- {}: above 1x, the restore beat a raw read of the same records timed next to it: the "
          "variance between the two windows{}.\n",
          name,
          s["config"] == "dram" ? "" : " (DISK READ shows whether the bytes came from the drive)");
    }
  }
  return t;
}

/// The independent ceiling: fio reading the same file ranges. Per request where the request
/// measured one (time ratio, median), else against the median fio rate of the run at this chunk
/// size.
void put_fio_ratio(Json& s, const std::vector<const Json*>& members,
                   const std::vector<const Json*>& pooled) {
  auto kv_over_fio = [](const Json& r) -> std::optional<double> {
    auto k = field(r, "kv_bytes");
    auto f = field(r, "fio_seconds");
    if (!k || !f || *f <= 0) return std::nullopt;
    return *k / *f;
  };
  auto own = median_of(members, [](const Json& r) -> std::optional<double> {
    auto f = field(r, "fio_seconds");
    auto t = field(r, "seconds");
    if (!f || !t || *t <= 0) return std::nullopt;
    return *f / *t;
  });
  std::optional<double> fio_gbps =
      own ? median_of(members, kv_over_fio) : median_of(pooled, kv_over_fio);
  put(s, "fio_kv_gbps", fio_gbps, 1e-9);
  if (own) {
    s["ratio_to_fio"] = *own;
  } else if (fio_gbps && s["kv_gbps"].is_number()) {
    s["ratio_to_fio"] = s["kv_gbps"].get<double>() / (*fio_gbps * 1e-9);
  } else {
    s["ratio_to_fio"] = nullptr;
  }
}

}  // namespace

/// The states a staging slot's time is split into (Stats' read_slot_*), as the rank workers name
/// them, and what each means.
constexpr std::array<const char*, 5> kSlotStates = {"reading", "queued", "consuming", "device_wait",
                                                    "refill_wait"};
constexpr std::array<const char*, 5> kSlotStateText = {
    "a read in flight", "read, waiting for a consumer thread",
    "being consumed (headers checked, copies queued)", "waiting for its copy to the device",
    "waiting to be refilled"};

/// Where the staging slots' time went over `members`: each state's median share of it.
void put_slot_shares(Json& s, const std::vector<const Json*>& members) {
  for (const char* part : kSlotStates) {
    put(s, fmt::format("slot_share_{}", part).c_str(),
        median_of(members, [part](const Json& r) -> std::optional<double> {
          auto ns = field(r, fmt::format("slot_{}_ns", part).c_str());
          auto total = field(r, "slot_total_ns");
          if (!ns || !total || *total <= 0) return std::nullopt;
          return *ns / *total;
        }));
  }
  // What no state took: before a slot's first piece, after its last, handed elsewhere.
  put(s, "slot_share_idle", median_of(members, [](const Json& r) -> std::optional<double> {
        auto total = field(r, "slot_total_ns");
        if (!total || *total <= 0) return std::nullopt;
        double taken = 0;
        for (const char* part : kSlotStates) {
          taken += field(r, fmt::format("slot_{}_ns", part).c_str()).value_or(0);
        }
        return std::max(0.0, 1 - taken / *total);
      }));
}

/// A SLOTS line for summary `s` (put_slot_shares'), named `what`; empty where it has none.
std::string slot_line(const Json& s, const std::string& what) {
  if (!s.value("slot_share_reading", Json()).is_number()) return "";
  std::string parts;
  for (size_t i = 0; i < kSlotStates.size(); ++i) {
    const std::string key = fmt::format("slot_share_{}", kSlotStates[i]);
    if (!s.contains(key) || !s[key].is_number()) continue;
    parts += fmt::format("{}{} {:.0f}%", parts.empty() ? "" : ", ", kSlotStateText[i],
                         100 * s[key].get<double>());
  }
  const Json idle = s.value("slot_share_idle", Json());
  return fmt::format(
      "SLOTS {}: of the staging slots' time (slots x the read's time, all ranks and drives), {}; "
      "idle (before a slot's first piece or after its last) {:.0f}% (medians)\n",
      what, parts, idle.is_number() ? 100 * idle.get<double>() : 0.0);
}

/// One SLOTS line per restore configuration.
std::string slot_lines(const Json& summary) {
  std::string t;
  for (const Json& s : summary) {
    if (s["phase"] != "repeat") continue;
    t += slot_line(s, fmt::format("{} (chunk {})", s["config"].get<std::string>(),
                                  s["chunk_tokens"].get<int>()));
  }
  return t;
}

Json summarize(const std::vector<Json>& rows) {
  // Groups in first-seen order.
  const auto groups = group_rows(rows, [](const Json& r) -> std::optional<std::string> {
    return fmt::format("{}|{}|{}", r.value("phase", ""), r.value("config", ""),
                       r.value("chunk_tokens", 0));
  });
  // The drive's ceiling per chunk size and stage (ranks of another TP size read other bytes:
  // --restore-ranks): KV bytes over the raw O_DIRECT read time of the same records, from every
  // request that measured one.
  auto pool = [](const Json& r) {
    return fmt::format("{}|{}", r.value("chunk_tokens", 0), r.value("tp_restored", 0));
  };
  std::map<std::string, std::vector<const Json*>> ceilings, fio_reads;
  for (const Json& r : rows) {
    if (r.contains("ceiling_seconds")) ceilings[pool(r)].push_back(&r);
    if (r.contains("fio_seconds")) fio_reads[pool(r)].push_back(&r);
  }
  Json out = Json::array();
  for (const auto& [key, members] : groups) {
    const Json& first = *members.front();
    Json s = {{"config", first.value("config", "")},
              {"chunk_tokens", first.value("chunk_tokens", 0)},
              {"phase", first.value("phase", "")},
              {"requests", members.size()}};
    put(s, "restore_ms", median_of(members, [](const Json& r) { return field(r, "seconds"); }),
        1e3);
    put(s, "disk_read_gbps", median_of(members, rate("disk_read_bytes")), 1e-9);
    put(s, "disk_write_gbps", median_of(members, rate("disk_write_bytes")), 1e-9);
    put(s, "dram_measured_gbps", median_of(members, rate("host_bytes_measured")), 1e-9);
    put(s, "dram_accounted_gbps", median_of(members, rate("host_bytes_accounted")), 1e-9);
    put(s, "pcie_rx_gbps", median_of(members, rate("pcie_rx_bytes")), 1e-9);
    put(s, "cpu_core_s",
        median_of(members, [](const Json& r) { return field(r, "machine_core_seconds"); }));
    put(s, "cpu_cores_busy", median_of(members, rate("machine_core_seconds")));
    put(s, "kvtier_core_s",
        median_of(members, [](const Json& r) { return field(r, "kvtier_core_seconds"); }));
    put(s, "kvtier_core_s_per_gb", median_of(members, [](const Json& r) -> std::optional<double> {
          auto c = field(r, "kvtier_core_seconds");
          auto k = field(r, "kv_bytes");
          if (!c || !k || *k <= 0) return std::nullopt;
          return *c / (*k / 1e9);
        }));
    put(s, "fio_core_s_per_gb", median_of(members, [](const Json& r) -> std::optional<double> {
          auto c = field(r, "fio_core_seconds");
          auto b = field(r, "fio_bytes");
          if (!c || !b || *b <= 0) return std::nullopt;
          return *c / (*b / 1e9);
        }));
    put(s, "kv_gbps", median_of(members, rate("kv_bytes")), 1e-9);
    put(s, "disk_bytes_per_kv_byte", median_of(members, [](const Json& r) -> std::optional<double> {
          auto d = field(r, "disk_read_bytes");
          auto k = field(r, "kv_bytes");
          if (!d || !k || *k <= 0) return std::nullopt;
          return *d / *k;
        }));
    // What the store read per KV byte: headers and padding over 1, coded records under it.
    put(s, "read_bytes_per_kv_byte", median_of(members, [](const Json& r) -> std::optional<double> {
          auto b = field(r, "bytes_read");
          auto k = field(r, "kv_bytes_restored");
          if (!b || !k || *k <= 0) return std::nullopt;
          return *b / *k;
        }));
    if (s["phase"] == "unique") {
      put(s, "prefill_stand_in_ms",
          median_of(members, [](const Json& r) { return field(r, "prefill_stand_in_seconds"); }),
          1e3);
      put(s, "save_ms", median_of(members, [](const Json& r) { return field(r, "save_seconds"); }),
          1e3);
      out.push_back(std::move(s));
      continue;
    }
    put(s, "host_bytes_per_kv_byte", median_of(members, host_bytes_per_kv_byte));
    // A DRAM-tier restore is held against the host-to-device link, a disk restore against the
    // drive.
    const bool link = members.front()->contains("link_ceiling_seconds");
    const char* ceiling_key = link ? "link_ceiling_seconds" : "ceiling_seconds";
    auto own = median_of(members, [ceiling_key](const Json& r) -> std::optional<double> {
      auto c = field(r, ceiling_key);
      auto t = field(r, "seconds");
      if (!c || !t || *t <= 0) return std::nullopt;
      return *c / *t;
    });
    auto kv_over_ceiling = [ceiling_key](const Json& r) -> std::optional<double> {
      auto k = field(r, "kv_bytes");
      auto c = field(r, ceiling_key);
      if (!k || !c || *c <= 0) return std::nullopt;
      return *k / *c;
    };
    std::optional<double> ceiling_gbps = link ? median_of(members, kv_over_ceiling)
                                              : median_of(ceilings[pool(first)], kv_over_ceiling);
    put(s, "ceiling_kv_gbps", ceiling_gbps, 1e-9);
    if (own) {
      s["ratio_to_ceiling"] = *own;
      s["ceiling_source"] =
          link ? "per request (host-to-device copy of the same bytes, all ranks at once)"
               : "per request (raw O_DIRECT read of the same records next to each restore)";
    } else if (ceiling_gbps && s["kv_gbps"].is_number()) {
      s["ratio_to_ceiling"] = s["kv_gbps"].get<double>() / (*ceiling_gbps * 1e-9);
      s["ceiling_source"] = "median of this run's ceiling reads at this chunk size";
    } else {
      s["ratio_to_ceiling"] = nullptr;
    }
    if (!link) put_fio_ratio(s, members, fio_reads[pool(first)]);
    uint64_t exact = 0, hits = 0;
    bool cufile = true;
    for (const Json* r : members) {
      exact += r->value("exact", false) ? 1 : 0;
      hits += r->value("dram_hits", uint64_t{0});
      cufile = cufile && r->value("via_cufile", false);
    }
    s["byte_exact"] = exact;
    s["dram_hit_records"] = hits;
    s["via_cufile"] = cufile;
    put_slot_shares(s, members);
    out.push_back(std::move(s));
  }
  return out;
}

/// What the FIO column is, or why it is empty.
static std::string fio_ceiling_text(const Json& fio) {
  if (fio.contains("what")) {
    std::string sweep;
    for (const Json& d : fio.value("depth_sweep", Json::array())) {
      const uint64_t size = d.value("request_bytes", fio.value("request_bytes", uint64_t{0}));
      sweep += fmt::format("{}{} KiB x {}: {:.2f}", sweep.empty() ? "" : ", ", size >> 10,
                           d["depth"].get<unsigned>(), d["gb_per_s"].get<double>());
    }
    std::string more;
    for (const Json& m : fio.value("more_streams", Json::array())) {
      more +=
          fmt::format("{}{} streams: {} KiB x {}", more.empty() ? "" : ", ", m.value("streams", 0),
                      m.value("request_bytes", uint64_t{0}) >> 10, m.value("depth", 0u));
    }
    return fmt::format(
        "{} took, next to each restore, at its fastest request size and depth on the first "
        "session ({} KiB x {}; GB/s of each tried: {}){}",
        fio["what"].get<std::string>(), fio.value("request_bytes", uint64_t{0}) >> 10,
        fio.value("depth", 0u), sweep,
        more.empty() ? ""
                     : fmt::format("; a stage with another number of streams (ranks x drives) at "
                                   "its own fastest, found the same way ({})",
                                   more));
  }
  return "fio took: NOT MEASURED in this run (" + fio.value("error", std::string("no fio")) +
         "); RATIO (RAW) is then no independent ceiling";
}

std::string device_headline(const Json& machine) {
  if (!machine.value("gpu", false)) {
    return "**Host-emulated device: no GPU was used.** KV was restored into host memory standing "
           "in for GPU "
           "memory: PCIe was not sampled, gds cannot run and a DRAM-tier hit is a CPU copy, so no "
           "figure here is a "
           "GPU's.";
  }
  std::string gpus;
  for (const Json& d : machine.value("rank_devices", Json::array())) {
    if (d.is_string()) gpus += (gpus.empty() ? "" : ", ") + d.get<std::string>();
  }
  return fmt::format("**GPU: {}.** KV was restored into GPU memory, one rank per GPU.",
                     gpus.empty() ? "unnamed" : gpus);
}

std::string render_table(const Json& summary, const Json& machine,
                         const std::map<std::string, std::string>& cufile, const Json& fio) {
  const Json samplers = machine.value("samplers", Json::object());
  const bool measured = samplers.value("dram_measured", false);
  std::string t = device_headline(machine) +
                  "\n\nTable 1. Medians over the repeat windows (kvtier seed workload)\n\n";
  t += fmt::format(
      "| CONFIGURATION | CHUNK | RESTORE | DISK READ | DRAM BW ({}) | PCIE RX | CPU / REQ | CORES "
      "BUSY | "
      "KVTIER CPU / GB | FIO CPU / GB | RESTORE GB/s | FIO GB/s | RATIO (FIO) | RAW READ GB/s | "
      "RATIO (RAW) | "
      "HOST B / KV B | "
      "BYTE-EXACT |\n",
      measured ? "measured" : "accounted");
  t += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Json& s : summary) {
    if (s["phase"] != "repeat") continue;
    const std::string name = config_name(s, cufile);
    t += fmt::format(
        "| {} | {} | {} ms | {} GB/s | {} GB/s | {} | {} core-s | {} | {} core-s | {} | {} | {} | "
        "{} "
        "| "
        "{} | {} | {} | {}/{} |\n",
        name, s["chunk_tokens"].get<int>(), thousands(cell(s, "restore_ms", "{:.0f}")),
        cell(s, "disk_read_gbps", "{:.2f}"),
        cell(s, measured ? "dram_measured_gbps" : "dram_accounted_gbps", "{:.2f}"),
        s["pcie_rx_gbps"].is_null() ? std::string("n/a") : cell(s, "pcie_rx_gbps", "{:.2f} GB/s"),
        cell(s, "cpu_core_s", "{:.2f}"), cell(s, "cpu_cores_busy", "{:.2f}"),
        cell(s, "kvtier_core_s_per_gb", "{:.3f}"),
        s.contains("fio_core_s_per_gb") ? cell(s, "fio_core_s_per_gb", "{:.3f} core-s")
                                        : std::string("n/a"),
        cell(s, "kv_gbps", "{:.2f}"),
        s.contains("fio_kv_gbps") ? cell(s, "fio_kv_gbps", "{:.2f}") : std::string("n/a"),
        s.contains("ratio_to_fio") ? cell(s, "ratio_to_fio", "{:.2f}x") : std::string("n/a"),
        cell(s, "ceiling_kv_gbps", "{:.2f}"), cell(s, "ratio_to_ceiling", "{:.2f}x"),
        cell(s, "host_bytes_per_kv_byte", "{:.4f}"), s["byte_exact"].get<uint64_t>(),
        s["requests"].get<uint64_t>());
  }
  t += "\nRESTORE: lookup to all KV in place and checksum-verified, both ranks, end to end. DISK "
       "READ: "
       "/proc/diskstats of the store's device inside each window. ";
  t += measured ? "DRAM BW: memory-controller counters. "
                : "DRAM BW: accounted from what the data path moved (no memory-controller counters "
                  "on this "
                  "machine), not measured. ";
  // Said only of a store on one: a note on RAM-backed loop devices misleads about a real drive.
  const bool ram_loop =
      machine.value("store_device_model", std::string()).find("RAM-backed") != std::string::npos;
  t += "PCIE RX: " + samplers.value("pcie", std::string("n/a")) +
       ", both ranks summed. CPU / REQ: machine core-seconds in the window (/proc/stat" +
       (ram_loop ? "; on this RAM-backed loop device this includes its reads, which are CPU copies"
                 : "") +
       "). KVTIER CPU / GB: the rank processes' user + system time in the window per GB of KV "
       "restored. FIO CPU / GB: fio's own user + system time per GB reading the same ranges (what "
       "the reads alone cost a reader on this device" +
       (ram_loop ? ": on a RAM-backed loop device mostly the kernel's" : "") +
       "). FIO: the drive's ceiling, KV bytes over the time " + fio_ceiling_text(fio) +
       ". RAW READ: KV bytes over kvtier's own raw "
       "O_DIRECT read of the same records (same I/O code, no copy, no checksum), measured in the "
       "same run: "
       "attribution (how much of the gap is kvtier's reading), not a ceiling; for dram, a copy of "
       "the same bytes "
       "across the link a DRAM hit crosses instead (pinned host-to-device with a GPU, a host "
       "memcpy on the "
       "host-emulated device).\n";
  t += ratio_notes(summary, cufile, machine.value("gpu", false));
  t += slot_lines(summary);
  for (const auto& [config, note] : cufile) t += fmt::format("cuFile ({}): {}\n", config, note);
  // Every disk configuration must have read its bytes from the device, not from a cache.
  for (const Json& s : summary) {
    if (s["phase"] != "repeat" || s["config"] == "dram" || !s["disk_bytes_per_kv_byte"].is_number())
      continue;
    // Coded records store fewer bytes than the KV they hold: held against what the store read.
    auto number = [&s](const char* key, double otherwise) {
      return s.contains(key) && s[key].is_number() ? s[key].get<double>() : otherwise;
    };
    const double stored = number("read_bytes_per_kv_byte", 1.0);
    const double ratio = s["disk_bytes_per_kv_byte"].get<double>();
    if (ratio < 0.9 * std::min(stored, 1.0)) {
      t += fmt::format(
          "WARNING: {} (chunk {}): only {:.2f} device bytes read per KV byte (the store read "
          "{:.2f}): part of the restore was served from a cache, not the drive\n",
          s["config"].get<std::string>(), s["chunk_tokens"].get<int>(), ratio, stored);
    } else if (stored < 0.95) {
      // fio's column is KV bytes over fio's time reading the stored ranges; the drive's own rate
      // is the stored bytes over that time.
      const double raw_fio = number("fio_kv_gbps", 0.0) * stored;
      t += fmt::format(
          "{} (chunk {}): the store read {:.2f} bytes per KV byte (coded records, "
          "--compress){}\n",
          s["config"].get<std::string>(), s["chunk_tokens"].get<int>(), stored,
          raw_fio > 0 ? fmt::format("; KV delivered at {:.2f}x of the bytes fio "
                                    "reads from the drive a second",
                                    number("kv_gbps", 0.0) / raw_fio)
                      : "");
    }
  }
  return t;
}

double quantile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = std::clamp(p, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

Json summarize_concurrency(const std::vector<Json>& rows, double load_alone_gbps) {
  const auto groups = group_rows(rows, [](const Json& r) -> std::optional<std::string> {
    if (r.value("phase", "") != "concurrent") return std::nullopt;
    return fmt::format("{}|{}", r.value("config", ""), r.value("concurrency", 0));
  });
  Json out = Json::array();
  for (const auto& [key, members] : groups) {
    const Json& first = *members.front();
    const double n = first.value("concurrency", 1.0);
    Json s = {{"config", first.value("config", "")},
              {"concurrency", first.value("concurrency", 0)},
              {"rounds", members.size()}};
    put(s, "aggregate_gbps", median_of(members, rate("kv_bytes")), 1e-9);
    put(s, "ceiling_gbps",
        median_of(members,
                  [](const Json& r) -> std::optional<double> {
                    auto k = field(r, "kv_bytes");
                    auto c = field(r, "ceiling_seconds");
                    if (!k || !c || *c <= 0) return std::nullopt;
                    return *k / *c;
                  }),
        1e-9);
    put(s, "ratio_to_ceiling", median_of(members, [](const Json& r) -> std::optional<double> {
          auto c = field(r, "ceiling_seconds");
          auto t = field(r, "seconds");
          if (!c || !t || *t <= 0) return std::nullopt;
          return *c / *t;
        }));
    std::vector<double> latencies;
    for (const Json* r : members) {
      for (const Json& l : r->value("latencies", Json::array()))
        latencies.push_back(l.get<double>());
    }
    const double p50 = quantile(latencies, 0.5), p99 = quantile(latencies, 0.99);
    s["restores"] = latencies.size();
    s["p50_ms"] = p50 * 1e3;
    s["p99_ms"] = p99 * 1e3;
    s["p99_over_p50"] = p50 > 0 ? p99 / p50 : 0;
    put(s, "cpu_core_s_per_restore",
        median_of(members, [n](const Json& r) -> std::optional<double> {
          auto c = field(r, "machine_core_seconds");
          return c ? std::optional<double>(*c / n) : std::nullopt;
        }));
    put(s, "cpu_cores_busy", median_of(members, rate("machine_core_seconds")));
    // The machine's CPU includes a host load when one runs: kvtier's own is the rank processes'.
    put(s, "kvtier_core_s_per_restore",
        median_of(members, [n](const Json& r) -> std::optional<double> {
          auto c = field(r, "kvtier_core_seconds");
          return c ? std::optional<double>(*c / n) : std::nullopt;
        }));
    put(s, "host_bytes_per_kv_byte", median_of(members, host_bytes_per_kv_byte));
    put(s, "dram_accounted_gbps", median_of(members, rate("host_bytes_accounted")), 1e-9);
    put(s, "dram_measured_gbps", median_of(members, rate("host_bytes_measured")), 1e-9);
    put(s, "pcie_rx_gbps", median_of(members, rate("pcie_rx_bytes")), 1e-9);
    put(s, "load_gbps", median_of(members, rate("load_bytes")), 1e-9);
    // Alone: measured next to each round where the rows have it, else once for the run.
    const std::optional<double> alone_here =
        median_of(members, [](const Json& r) { return field(r, "load_alone_bytes_per_s"); });
    const double alone = alone_here ? *alone_here * 1e-9 : load_alone_gbps;
    if (alone > 0 && s["load_gbps"].is_number()) {
      s["load_alone_gbps"] = alone;
      s["load_taken_gbps"] = alone - s["load_gbps"].get<double>();
    }
    uint64_t exact = 0;
    bool cufile = true;
    for (const Json* r : members) {
      exact += r->value("exact", false) ? 1 : 0;
      cufile = cufile && r->value("via_cufile", false);
    }
    s["byte_exact_rounds"] = exact;
    s["via_cufile"] = cufile;
    put_slot_shares(s, members);
    out.push_back(std::move(s));
  }
  return out;
}

std::string render_concurrency_table(const Json& summary, const Json& machine,
                                     const std::map<std::string, std::string>& cufile) {
  const bool measured = machine.value("samplers", Json::object()).value("dram_measured", false);
  std::string t = device_headline(machine) +
                  "\n\nConcurrent restores: N sessions at once per rank (medians over rounds; "
                  "latency quantiles over "
                  "every restore)\n\n";
  t += fmt::format(
      "| CONFIGURATION | N | AGGREGATE GB/s | CEILING GB/s | RATIO | p50 | p99 | p99/p50 | KVTIER "
      "CPU / RESTORE | "
      "DRAM BW ({}) | HOST B / KV B | LOAD GB/s (alone -> during) | BYTE-EXACT |\n",
      measured ? "measured" : "accounted");
  t += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  bool above_one = false;
  for (const Json& s : summary) {
    const std::string name = config_name(s, cufile);
    above_one = above_one || (s["ratio_to_ceiling"].is_number() &&
                              s["ratio_to_ceiling"].get<double>() >= kAboveOne);
    const std::string load =
        s.contains("load_alone_gbps")
            ? fmt::format("{:.1f} -> {:.1f}", s["load_alone_gbps"].get<double>(),
                          s["load_gbps"].get<double>())
            : std::string("no load");
    t += fmt::format(
        "| {} | {} | {} | {} | {} | {} ms | {} ms | {:.2f} | {} core-s | {} GB/s | {} | {} | {}/{} "
        "|\n",
        name, s["concurrency"].get<int>(), cell(s, "aggregate_gbps", "{:.2f}"),
        cell(s, "ceiling_gbps", "{:.2f}"), cell(s, "ratio_to_ceiling", "{:.2f}x"),
        thousands(cell(s, "p50_ms", "{:.0f}")), thousands(cell(s, "p99_ms", "{:.0f}")),
        s["p99_over_p50"].get<double>(), cell(s, "kvtier_core_s_per_restore", "{:.2f}"),
        cell(s, measured ? "dram_measured_gbps" : "dram_accounted_gbps", "{:.2f}"),
        cell(s, "host_bytes_per_kv_byte", "{:.4f}"), load, s["byte_exact_rounds"].get<uint64_t>(),
        s["rounds"].get<uint64_t>());
  }
  t += "\nAGGREGATE: KV bytes of all N sessions (both ranks) over the round's window. CEILING: the "
       "same N sessions "
       "read raw with O_DIRECT at once, next to each round (posix and gds only). Latency: a "
       "session's slowest rank. "
       "KVTIER CPU: the rank processes' core-seconds per restore (the machine's, in the JSON, "
       "include the load). "
       "LOAD: a background memory-copy load (read + write bytes) alone (for 0.5 s right before "
       "each round) and "
       "during the restore windows.\n";
  if (above_one) {
    t += "RATIO above 1x: the ceiling is the same sessions read raw with the same I/O code in a "
         "window of its own, "
         "next to the round, not a bound; the drive's variance between the two windows can put a "
         "round above it.\n";
  }
  for (const auto& [config, note] : cufile) t += fmt::format("cuFile ({}): {}\n", config, note);
  for (const Json& s : summary) {
    t += slot_line(s, fmt::format("{}, {} at once", s["config"].get<std::string>(),
                                  s["concurrency"].get<int>()));
  }
  return t;
}

void write_csv(const std::vector<Json>& rows, const std::string& path) {
  std::vector<std::string> columns;
  for (const Json& r : rows) {
    for (const auto& [k, v] : r.items()) {
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
    }
  }
  std::ofstream out(path);
  for (size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << columns[i];
  out << "\n";
  for (const Json& r : rows) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i) out << ",";
      if (!r.contains(columns[i])) continue;
      const Json& v = r[columns[i]];
      if (v.is_string()) {
        std::string s = v.get<std::string>();
        std::string quoted = "\"";
        for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        out << quoted << "\"";
      } else {
        out << v.dump();
      }
    }
    out << "\n";
  }
}

namespace fs = std::filesystem;

ReportOutcome make_report(const std::string& run_dir) {
  const std::string script = KVTIER_SEED_REPORT_SCRIPT;
  if (script.empty() || !fs::exists(script)) {
    std::printf("report: seed_report.py not found; figures not made\n");
    return ReportOutcome::kNoScript;
  }
  // The first Python that has matplotlib (a pyenv python3 may shadow Debian's, which has it).
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    if (std::system(fmt::format("{} -c 'import matplotlib' >/dev/null 2>&1", python).c_str()) != 0)
      continue;
    const std::string cmd = fmt::format("{} '{}' '{}'", python, script, run_dir);
    if (std::system(cmd.c_str()) == 0) return ReportOutcome::kMade;
    std::printf("report: '%s' failed\n", cmd.c_str());
    return ReportOutcome::kFailed;
  }
  std::printf(
      "report: no python3 with matplotlib (tools/setup.sh installs python3-matplotlib); run "
      "tools/kvtier/seed/seed_report.py %s later\n",
      run_dir.c_str());
  return ReportOutcome::kNoMatplotlib;
}

std::string store_device_model(const Result<std::string>& device, const std::string& sys) {
  if (!device) return "unknown (" + device.error().message() + ")";
  // A loop device is a file standing in for a drive: say which, and when that file is in RAM.
  if (auto backing =
          read_file((fs::path(sys) / "block" / *device / "loop" / "backing_file").string())) {
    std::string file = *backing;
    while (!file.empty() && std::isspace(static_cast<unsigned char>(file.back()))) file.pop_back();
    return fmt::format(
        "loop device over {}{}", file,
        file.starts_with("/dev/shm/")
            ? " (RAM-backed loop device standing in for NVMe: its reads are CPU copies)"
            : "");
  }
  const fs::path dir = fs::path(sys) / "block" / *device / "device";
  std::string model;
  if (auto m = read_file((dir / "model").string())) model = *m;
  while (!model.empty() && std::isspace(static_cast<unsigned char>(model.back()))) model.pop_back();
  if (!model.empty()) return model;
  std::error_code ec;
  const fs::path driver = fs::read_symlink(dir / "driver", ec);
  return fmt::format("unknown (the kernel lists no model for {}{})", *device,
                     ec ? std::string() : "; driver " + driver.filename().string());
}

}  // namespace kvtier::seed
