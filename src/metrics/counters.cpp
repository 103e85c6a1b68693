// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "metrics/counters.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/posix.hpp"

namespace kvtier::metrics {
namespace {

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool to_u64(std::string_view s, uint64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

Status malformed(std::string_view what) {
  return {ErrorCode::kInvalidArgument, fmt::format("malformed {}", what)};
}

template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (fn(text.substr(0, nl))) return;
    if (nl == std::string_view::npos) return;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

Result<DiskCounters> parse_diskstats(std::string_view text, std::string_view device) {
  Result<DiskCounters> out =
      fail(ErrorCode::kNotFound, fmt::format("no device {} in /proc/diskstats", device));
  for_each_line(text, [&](std::string_view line) {
    auto f = fields(line);
    if (f.size() < 10 || f[2] != device) return false;
    DiskCounters c;
    if (!to_u64(f[3], c.reads) || !to_u64(f[5], c.sectors_read) || !to_u64(f[7], c.writes) ||
        !to_u64(f[9], c.sectors_written)) {
      out = fail(malformed("/proc/diskstats line"));
    } else {
      out = c;
    }
    return true;
  });
  return out;
}

Result<std::string> block_device_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(posix_error(errno, "stat " + path));
  const std::string sys = fmt::format("/sys/dev/block/{}:{}", major(st.st_dev), minor(st.st_dev));
  // A partition's sysfs directory holds a "partition" file; its disk is the parent directory.
  std::error_code ec;
  std::string dir = std::filesystem::canonical(sys, ec).string();
  if (ec)
    return fail(ErrorCode::kNotFound,
                fmt::format("{} has no block device in /sys ({})", path, sys));
  if (std::filesystem::exists(dir + "/partition"))
    dir = std::filesystem::path(dir).parent_path().string();
  return std::filesystem::path(dir).filename().string();
}

Result<CpuCounters> parse_proc_stat(std::string_view text) {
  Result<CpuCounters> out = fail(malformed("/proc/stat: no cpu line"));
  for_each_line(text, [&](std::string_view line) {
    auto f = fields(line);
    if (f.empty() || f[0] != "cpu") return false;
    uint64_t v[8] = {};
    for (size_t i = 0; i < 8; ++i) {
      if (f.size() <= i + 1 || !to_u64(f[i + 1], v[i])) {
        out = fail(malformed("/proc/stat cpu line"));
        return true;
      }
    }
    // user nice system idle iowait irq softirq steal
    CpuCounters c;
    c.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    c.total = c.busy + v[3] + v[4];
    out = c;
    return true;
  });
  return out;
}

Result<uint64_t> parse_process_ticks(std::string_view text) {
  // The command name (field 2) may hold spaces and parentheses: fields are counted after the last
  // ')'.
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return fail(malformed("/proc/<pid>/stat"));
  auto f = fields(text.substr(close + 1));
  // After ')': state(3) ppid(4) ... utime(14) stime(15) => indexes 11 and 12 here.
  uint64_t utime = 0, stime = 0;
  if (f.size() < 13 || !to_u64(f[11], utime) || !to_u64(f[12], stime))
    return fail(malformed("/proc/<pid>/stat"));
  return utime + stime;
}

Result<double> delta_in_window(std::span<const Sample> s, double t0, double t1) {
  if (s.size() < 2 || t1 < t0 || s.front().t > t0 || s.back().t < t1) {
    return fail(ErrorCode::kInvalidArgument, "samples do not cover the window");
  }
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i].t < s[i - 1].t) return fail(ErrorCode::kInvalidArgument, "samples go back in time");
  }
  auto value_at = [&](double t) {
    auto it =
        std::lower_bound(s.begin(), s.end(), t, [](const Sample& a, double x) { return a.t < x; });
    if (it == s.begin()) return it->value;
    const Sample& b = *it;
    const Sample& a = *(it - 1);
    if (b.t == a.t) return b.value;
    return a.value + (b.value - a.value) * (t - a.t) / (b.t - a.t);
  };
  return value_at(t1) - value_at(t0);
}

Result<double> median(std::vector<double> v) {
  if (v.empty()) return fail(ErrorCode::kInvalidArgument, "median of nothing");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace kvtier::metrics
