// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "metrics/memory_traffic.hpp"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "common/posix.hpp"

namespace kvtier::metrics {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

bool parse_u64(std::string_view s, uint64_t& v) {
  int base = 10;
  if (s.starts_with("0x") || s.starts_with("0X")) {
    s.remove_prefix(2);
    base = 16;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// Splits on `sep`, skipping empty parts.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t end = std::min(s.find(sep, at), s.size());
    if (end > at) out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

Status bad(std::string_view what) { return {ErrorCode::kInvalidArgument, std::string(what)}; }

}  // namespace

Result<uint64_t> encode_pmu_event(std::string_view spec, const PmuFormat& format) {
  uint64_t config = 0;
  for (std::string_view term : split(trim(spec), ',')) {
    const size_t eq = term.find('=');
    const std::string name(trim(term.substr(0, eq)));
    uint64_t value = 1;  // a bare flag means 1
    if (eq != std::string_view::npos && !parse_u64(trim(term.substr(eq + 1)), value)) {
      return fail(bad(fmt::format("PMU event '{}': bad value in '{}'", spec, term)));
    }
    auto f = format.find(name);
    if (f == format.end())
      return fail(bad(fmt::format("PMU event '{}': no format field '{}'", spec, name)));
    std::string_view bits = trim(f->second);
    if (!bits.starts_with("config:")) {
      return fail(bad(
          fmt::format("PMU format '{}' is '{}': only config fields are supported", name, bits)));
    }
    bits.remove_prefix(7);
    unsigned shift = 0;  // bits of value already placed
    for (std::string_view range : split(bits, ',')) {
      const size_t dash = range.find('-');
      uint64_t lo = 0, hi = 0;
      if (!parse_u64(range.substr(0, dash), lo) ||
          !parse_u64(dash == std::string_view::npos ? range : range.substr(dash + 1), hi) ||
          hi < lo || hi > 63) {
        return fail(bad(fmt::format("PMU format '{}': bad bit range '{}'", name, range)));
      }
      const unsigned width = static_cast<unsigned>(hi - lo + 1);
      const uint64_t part =
          shift >= 64 ? 0 : (value >> shift) & (width >= 64 ? ~0ull : (1ull << width) - 1);
      config |= part << lo;
      shift += width;
    }
    if (shift < 64 && (value >> shift) != 0) {
      return fail(
          bad(fmt::format("PMU event '{}': {} does not fit field '{}'", spec, value, name)));
    }
  }
  return config;
}

namespace {

struct Counter {
  UniqueFd fd;
  double scale = 1;  // bytes per count
};

class ImcTraffic final : public MemoryTraffic {
 public:
  explicit ImcTraffic(std::vector<Counter> counters, size_t pmus)
      : counters_(std::move(counters)), pmus_(pmus) {}

  Result<double> bytes() override {
    double total = 0;
    for (const Counter& c : counters_) {
      uint64_t count = 0;
      if (::read(c.fd.get(), &count, sizeof(count)) != static_cast<ssize_t>(sizeof(count))) {
        return fail(ErrorCode::kIo, "reading a memory-controller counter");
      }
      total += static_cast<double>(count) * c.scale;
    }
    return total;
  }

  std::string source() const override {
    return fmt::format(
        "memory controllers (uncore IMC CAS read+write counters, {} PMUs, perf_event_open)", pmus_);
  }

 private:
  std::vector<Counter> counters_;
  size_t pmus_;
};

Result<double> scale_to_bytes(const std::filesystem::path& event) {
  double scale = 1;
  if (auto s = read_file(event.string() + ".scale")) {
    const std::string text(trim(*s));
    scale = std::strtod(text.c_str(), nullptr);
  }
  std::string unit = "B";
  if (auto u = read_file(event.string() + ".unit")) unit = std::string(trim(*u));
  if (unit == "MiB") return scale * 1048576.0;
  if (unit == "KiB") return scale * 1024.0;
  if (unit == "B" || unit == "Bytes") return scale;
  return fail(ErrorCode::kNotSupported, fmt::format("{}: unit '{}'", event.string(), unit));
}

}  // namespace

Result<std::unique_ptr<MemoryTraffic>> MemoryTraffic::open(const std::string& sysfs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<Counter> counters;
  size_t pmus = 0;
  for (const auto& dir : fs::directory_iterator(sysfs, ec)) {
    const std::string name = dir.path().filename().string();
    if (!name.starts_with("uncore_imc")) continue;
    auto type_text = read_file((dir.path() / "type").string());
    uint64_t type = 0;
    if (!type_text || !parse_u64(trim(*type_text), type)) continue;
    PmuFormat format;
    for (const auto& f : fs::directory_iterator(dir.path() / "format", ec)) {
      if (auto t = read_file(f.path().string()))
        format[f.path().filename().string()] = std::string(trim(*t));
    }
    int cpu = 0;  // uncore counters count for the whole socket from one CPU of its cpumask
    if (auto mask = read_file((dir.path() / "cpumask").string()))
      cpu = std::atoi(std::string(trim(*mask)).c_str());
    for (const char* event : {"cas_count_read", "cas_count_write"}) {
      const fs::path path = dir.path() / "events" / event;
      auto spec = read_file(path.string());
      if (!spec) continue;
      auto config = encode_pmu_event(*spec, format);
      if (!config) return fail(config.error());
      auto scale = scale_to_bytes(path);
      if (!scale) return fail(scale.error());
      perf_event_attr attr{};
      attr.size = sizeof(attr);
      attr.type = static_cast<uint32_t>(type);
      attr.config = *config;
      const long fd = ::syscall(SYS_perf_event_open, &attr, -1, cpu, -1, 0);
      if (fd < 0) {
        return fail(
            ErrorCode::kNotSupported,
            fmt::format(
                "perf_event_open({}/{}): {} (needs CAP_PERFMON or kernel.perf_event_paranoid <= 0)",
                name, event, std::strerror(errno)));
      }
      counters.push_back({UniqueFd(static_cast<int>(fd)), *scale});
    }
    ++pmus;
  }
  if (counters.empty()) {
    return fail(ErrorCode::kNotSupported,
                fmt::format("no memory-controller counters (no uncore_imc PMU under {})", sysfs));
  }
  return std::unique_ptr<MemoryTraffic>(new ImcTraffic(std::move(counters), pmus));
}

}  // namespace kvtier::metrics
