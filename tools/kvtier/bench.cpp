// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// kvtier bench: save synthetic sessions, then restore each over every requested I/O path with the
// page cache dropped, against the raw O_DIRECT read ceiling of the same files measured in the run.
#include "bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "common/posix.hpp"
#include "fio_ceiling.hpp"
#include "metrics/counters.hpp"
#include "synthetic.hpp"

namespace kvtier::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

/// Kernel counters at one edge of a restore window.
struct Edge {
  metrics::DiskCounters disk;
  metrics::CpuCounters cpu;
  uint64_t process_ticks = 0;
};

/// Reads the counters; fields it cannot read stay zero (the figures then read zero, and the
/// header line says which counter is missing).
Edge read_edge(const std::string& device) {
  Edge e;
  if (auto t = read_file("/proc/diskstats"); t && !device.empty()) {
    if (auto d = metrics::parse_diskstats(*t, device)) e.disk = *d;
  }
  if (auto t = read_file("/proc/stat")) {
    if (auto c = metrics::parse_proc_stat(*t)) e.cpu = *c;
  }
  if (auto t = read_file("/proc/self/stat")) {
    if (auto p = metrics::parse_process_ticks(*t)) e.process_ticks = *p;
  }
  return e;
}

struct PathResult {
  std::string path;
  std::vector<double> disk_read_bytes;  // per restore, from /proc/diskstats at the window edges
  std::vector<double> machine_core_s;   // per restore, /proc/stat busy time
  std::vector<double> process_core_s;   // per restore, this process's user + system time
  std::string io_engine;
  std::string fallback;
  std::vector<double> seconds;          // restore, per session
  std::vector<double> ceiling_seconds;  // kvtier's own raw read of the same records, per session
  std::vector<double> fio_seconds;      // fio reading the same ranges, per round (NaN: failed)
  std::vector<std::string> fio_errors;  // fio runs that failed (the table says so)
  uint64_t bytes_per_session = 0;       // KV bytes delivered
  uint64_t read_bytes_per_session = 0;  // bytes read from the files (headers and padding too)
  uint64_t extents = 0;
  bool verified = true;
};

/// `quiet`: warnings (a fallback, said by the first open of the path) only as errors.
Result<std::unique_ptr<Engine>> open_with(StoreFlags flags, const std::string& io,
                                          bool quiet = false) {
  flags.io = io;
  auto options = flags.options(true);
  if (!options) return fail(options.error());
  if (quiet) options->log_level = LogLevel::kError;
  return Engine::open(*options);
}

Status save_sessions(const StoreFlags& flags, const BenchFlags& bench,
                     nlohmann::ordered_json& out) {
  auto engine = open_with(flags, "direct");
  if (!engine) return engine.error();
  const KvGeometry& g = (*engine)->geometry();
  const uint64_t bytes = g.bytes_for_tokens(bench.tokens);
  std::unique_ptr<std::byte[]> kv(new std::byte[bytes]);
  double save_seconds = 0;
  Progress progress("save (prefill stand-in: synthetic KV from token ids)");
  for (uint64_t s = 0; s < bench.sessions; ++s) {
    auto ids = synthetic::tokens(bench.seed + s, bench.tokens);
    synthetic::fill_kv(g, ids, {kv.get(), bytes}, bench.tokens);
    auto start = Clock::now();
    auto saved = (*engine)->save(ids, ChunkedKv{{kv.get(), bytes}, bench.tokens});
    if (!saved) return saved.error();
    save_seconds += since(start);
    progress.update(s + 1, bench.sessions);
  }
  progress.finish();
  const double total = static_cast<double>(bytes * bench.sessions);
  out["save"] = {
      {"bytes", total}, {"seconds", save_seconds}, {"gb_per_s", total / save_seconds / 1e9}};
  std::printf("save      %s in %.2f s = %.2f GB/s (%s)\n", human_bytes(total).c_str(), save_seconds,
              total / save_seconds / 1e9, (*engine)->stats().io_engine.c_str());
  return {};
}

/// Raw O_DIRECT read of the records a restore of `ids` reads, through a direct-path engine.
Result<CeilingResult> session_ceiling(const StoreFlags& flags, std::span<const Token> ids) {
  auto engine = open_with(flags, "direct");
  if (!engine) return fail(engine.error());
  return (*engine)->measure_read_ceiling(ids);
}

/// The file ranges a restore of `ids` reads.
Result<std::vector<FileExtent>> session_extents(const StoreFlags& flags,
                                                std::span<const Token> ids) {
  auto engine = open_with(flags, "direct");
  if (!engine) return fail(engine.error());
  return (*engine)->read_extents(ids);
}

/// fio reading the file ranges a restore of `ids` reads.
Result<FioRead> session_fio(const StoreFlags& flags, std::span<const Token> ids, FioCeiling& fio,
                            uint64_t request) {
  KVTIER_ASSIGN_OR_RETURN(auto extents, session_extents(flags, ids));
  return fio.read(split_by_device(extents), request, fio.depth());
}

/// Restores session `ids` over `io` with the page cache dropped, checking every byte afterwards.
Status restore_once(const StoreFlags& flags, const std::string& io, std::span<const Token> ids,
                    std::span<std::byte> kv, const std::string& device, PathResult& r) {
  auto engine =
      open_with(flags, io, /*quiet=*/!r.seconds.empty());  // a fallback said once per path
  if (!engine) return engine.error();
  r.io_engine = (*engine)->stats().io_engine;
  r.fallback = (*engine)->stats().io_fallback;
  const KvGeometry& g = (*engine)->geometry();
  if (Status st = (*engine)->drop_page_cache(); !st.ok()) return st;
  const Edge before = read_edge(device);
  auto start = Clock::now();
  auto restored = (*engine)->restore(ids, ChunkedKv{{kv.data(), kv.size()}, ids.size()});
  const double seconds = since(start);
  const Edge after = read_edge(device);
  if (!restored) return restored.error();
  r.seconds.push_back(seconds);
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  r.disk_read_bytes.push_back(
      static_cast<double>(after.disk.bytes_read() - before.disk.bytes_read()));
  r.machine_core_s.push_back(static_cast<double>(after.cpu.busy - before.cpu.busy) / tick);
  r.process_core_s.push_back(static_cast<double>(after.process_ticks - before.process_ticks) /
                             tick);
  r.extents = restored->extents;
  r.read_bytes_per_session = restored->bytes_read;
  const uint64_t bad = synthetic::first_mismatch(g, ids, kv, ids.size());
  if (restored->tokens_restored != ids.size() || bad != ids.size()) r.verified = false;
  return {};
}

/// Per session: the restore, kvtier's raw read of the same records and fio's read of them, in
/// rotating order so that neither always finds the other's bytes warm in a lower cache (e.g. a VM
/// host's).
Result<PathResult> restore_sessions(const StoreFlags& flags, const BenchFlags& bench,
                                    const std::string& io, const Options& o,
                                    const std::string& device, FioCeiling* fio) {
  const KvGeometry& g = o.geometry;
  PathResult r;
  r.path = io;
  r.bytes_per_session = g.bytes_for_tokens(bench.tokens);
  std::unique_ptr<std::byte[]> kv(new std::byte[r.bytes_per_session]);
  // A serving engine's KV cache is resident: fault the destination in before timing anything.
  std::memset(kv.get(), 0, r.bytes_per_session);
  Progress progress(fmt::format("restore ({})", io));
  const uint64_t rounds = bench.sessions * std::max<uint64_t>(1, bench.repeat);
  for (uint64_t round = 0; round < rounds; ++round) {
    const uint64_t s = round % bench.sessions;
    auto ids = synthetic::tokens(bench.seed + s, bench.tokens);
    // The restore, kvtier's raw read and fio, in an order that rotates each round, so that none of
    // them always finds what another just read warm in a lower cache (e.g. a VM host's).
    for (int step = 0; step < 3; ++step) {
      switch ((step + round) % 3) {
        case 0:
          KVTIER_TRY(restore_once(flags, io, ids, {kv.get(), r.bytes_per_session}, device, r));
          break;
        case 1: {
          auto c = session_ceiling(flags, ids);
          if (!c) return fail(c.error());
          r.ceiling_seconds.push_back(c->seconds);
          break;
        }
        default: {
          if (fio == nullptr) break;
          auto f = session_fio(flags, ids, *fio, o.io_request_bytes);
          // One entry per round either way, so the ratios pair each fio read with its own restore.
          r.fio_seconds.push_back(f ? f->seconds : std::nan(""));
          if (!f) r.fio_errors.push_back(f.error().message());
        }
      }
    }
    progress.update(round + 1, rounds);
  }
  progress.finish();
  return r;
}

/// Finds fio (unless --fio off) and picks its depth on the first session: the fastest of
/// kFioDepths, or --fio-depth. A missing fio is said loudly and the run goes on without the
/// independent ceiling; a fio that fails on the store's files is an error.
Status start_fio(const StoreFlags& flags, const BenchFlags& bench, uint64_t request,
                 nlohmann::ordered_json& out, std::unique_ptr<FioCeiling>& fio) {
  if (bench.fio == "off") {
    std::printf("fio       off (--fio off): no independent ceiling in this run\n");
    return {};
  }
  auto found = FioCeiling::find(bench.fio, flags.root + "/fio");
  if (!found) {
    std::printf(
        "WARNING: %s; the table shows kvtier's own raw read only, which is not an independent "
        "ceiling\n",
        found.error().message().c_str());
    out["fio"] = {{"error", found.error().message()}};
    return {};
  }
  fio = std::make_unique<FioCeiling>(std::move(*found));
  auto ids = synthetic::tokens(bench.seed, bench.tokens);
  KVTIER_ASSIGN_OR_RETURN(auto extents, session_extents(flags, ids));
  std::vector<unsigned> depths(std::begin(kFioDepths), std::end(kFioDepths));
  if (bench.fio_depth > 0) depths = {bench.fio_depth};
  auto runs = fio->calibrate(split_by_device(extents), request, depths);
  if (!runs) {  // e.g. too little to time: the run goes on, saying so
    std::printf("WARNING: fio could not measure this run: %s\n", runs.error().message().c_str());
    out["fio"] = {{"error", runs.error().message()}};
    fio.reset();
    return {};
  }
  nlohmann::ordered_json sweep = nlohmann::ordered_json::array();
  for (const FioRead& r : *runs) sweep.push_back({{"depth", r.depth}, {"gb_per_s", r.gbps()}});
  std::string line;
  for (const auto& r : sweep)
    line += fmt::format(" {}:{:.2f}", r["depth"].get<unsigned>(), r["gb_per_s"].get<double>());
  std::printf("fio       %s; GB/s by depth:%s -> depth %u\n", fio->version().c_str(), line.c_str(),
              fio->depth());
  out["fio"] = {{"version", fio->version()},
                {"engine", fio->engine()},
                {"depth", fio->depth()},
                {"depth_sweep", sweep},
                {"what", fio->describe()}};
  return {};
}

void print_header(const StoreFlags& flags, const BenchFlags& bench, const Options& o) {
  std::printf("kvtier bench %s\n", KVTIER_VERSION_STRING);
#ifndef NDEBUG
  std::printf("WARNING: built without NDEBUG (debug build): figures are not representative\n");
#endif
  std::printf("geometry  %s (%s per token on this rank)\n", o.geometry.describe().c_str(),
              human_bytes(static_cast<double>(o.geometry.bytes_per_token())).c_str());
  std::printf(
      "workload  %llu sessions x %llu tokens = %s each; paths: %s; %llu restores per session\n",
      static_cast<unsigned long long>(bench.sessions),
      static_cast<unsigned long long>(bench.tokens),
      human_bytes(static_cast<double>(o.geometry.bytes_for_tokens(bench.tokens))).c_str(),
      bench.paths.c_str(), static_cast<unsigned long long>(bench.repeat));
  std::printf("store     %s (device: host-emulated; KV lands in host memory)\n",
              flags.root.c_str());
}

}  // namespace

int run_bench(StoreFlags flags, const BenchFlags& bench) {
  const std::string parent = flags.root;
  flags.root = fmt::format("{}/bench-{}", parent, ::getpid());
  auto options = flags.options(true);
  if (!options) return report(options.error(), "bench");
  // Save and each restore hold one session's KV and token ids at a time.
  const uint64_t session_bytes =
      options->geometry.bytes_for_tokens(bench.tokens) + bench.tokens * sizeof(Token);
  if (Status st = check_host_memory(
          session_bytes, fmt::format("--tokens {}: a session's KV and token ids", bench.tokens));
      !st.ok()) {
    return report(st, "bench");
  }
  if (Status st = make_dirs(parent); !st.ok()) return report(st, "bench");
  if (options->capacity_bytes == 0) {
    // Room for every session plus one segment of slack, so the benchmark never evicts.
    const uint64_t need = options->geometry.bytes_for_tokens(bench.tokens) * bench.sessions;
    // A whole number of 4 MiB: the default segment is a quarter of the capacity and must be a
    // multiple of 4 KiB (a small model's KV, e.g. tiny's 512 bytes a token, need not be).
    constexpr uint64_t kGrain = uint64_t{4} << 20;
    const uint64_t capacity = need + need / 8 + (uint64_t{2} << 30);
    flags.capacity = std::to_string((capacity + kGrain - 1) / kGrain * kGrain);
  }
  print_header(flags, bench, *options);
  nlohmann::ordered_json out;
  out["geometry"] = options->geometry.describe();
  out["sessions"] = bench.sessions;
  out["tokens"] = bench.tokens;
  int rc = 0;
  auto cleanup = [&] {
    if (!bench.keep) std::filesystem::remove_all(flags.root);
  };
  if (Status st = save_sessions(flags, bench, out); !st.ok()) {
    cleanup();
    return report(st, "bench save");
  }
  // The drive under the store, for /proc/diskstats deltas at each restore's edges.
  auto device = metrics::block_device_of(flags.root);
  std::printf("disk      %s\n",
              device ? device->c_str() : ("unknown: " + device.error().to_string()).c_str());
  auto resolved = options->resolved();
  if (!resolved) {
    cleanup();
    return report(resolved.error(), "bench");
  }
  std::unique_ptr<FioCeiling> fio;
  if (Status st = start_fio(flags, bench, resolved->io_request_bytes, out, fio); !st.ok()) {
    cleanup();
    return report(st, "bench fio");
  }
  std::vector<PathResult> results;
  std::stringstream paths(bench.paths);
  for (std::string io; std::getline(paths, io, ',');) {
    auto r = restore_sessions(flags, bench, io, *resolved, device.value_or(""), fio.get());
    if (!r) {
      cleanup();
      return report(r.error(), fmt::format("bench restore ({})", io));
    }
    results.push_back(std::move(*r));
  }
  cleanup();
  std::printf(
      "\nfio     = the ceiling: %s,\n"
      "          measured per session next to its restore; ratio = median of per-session time "
      "ratios\n"
      "raw     = kvtier's own raw read of the same records (same I/O engine, no copy or "
      "checksum):\n"
      "          attribution, not a ceiling\n\n",
      fio ? fio->describe().c_str() : "not measured");
  std::printf("%-9s %-24s %9s %9s %8s %8s %7s %8s %7s %8s %s\n", "path", "io engine", "p50 ms",
              "max ms", "GB/s", "fio GB/s", "ratio", "raw GB/s", "raw", "extents", "verified");
  auto ratio_of = [](const std::vector<double>& ceiling, const std::vector<double>& seconds) {
    std::vector<double> ratios;
    for (size_t i = 0; i < std::min(ceiling.size(), seconds.size()); ++i) {
      if (!std::isnan(ceiling[i]))
        ratios.push_back(ceiling[i] / seconds[i]);  // NaN: fio failed that round
    }
    return ratios.empty() ? std::nan("") : percentile(ratios, 0.5);
  };
  auto timed = [](const std::vector<double>& v) {
    std::vector<double> out;
    for (double x : v) {
      if (!std::isnan(x)) out.push_back(x);
    }
    return out;
  };
  for (const PathResult& r : results) {
    const double p50 = percentile(r.seconds, 0.5);
    const double gbs = static_cast<double>(r.bytes_per_session) / p50 / 1e9;
    const double read = static_cast<double>(r.read_bytes_per_session);
    const double ceiling_gbs = read / percentile(r.ceiling_seconds, 0.5) / 1e9;
    const double ratio = ratio_of(r.ceiling_seconds, r.seconds);
    const std::vector<double> fio_timed = timed(r.fio_seconds);
    const bool has_fio = !fio_timed.empty();
    const double fio_gbs = has_fio ? read / percentile(fio_timed, 0.5) / 1e9 : 0;
    const double fio_ratio = ratio_of(r.fio_seconds, r.seconds);
    std::printf("%-9s %-24s %9.1f %9.1f %8.2f %8s %7s %8.2f %6.2fx %8llu %s\n", r.path.c_str(),
                r.io_engine.c_str(), p50 * 1e3, percentile(r.seconds, 1.0) * 1e3, gbs,
                has_fio ? fmt::format("{:.2f}", fio_gbs).c_str() : "n/a",
                has_fio ? fmt::format("{:.2f}x", fio_ratio).c_str() : "n/a", ceiling_gbs, ratio,
                static_cast<unsigned long long>(r.extents), r.verified ? "byte-exact" : "MISMATCH");
    if (!r.fallback.empty()) std::printf("          fallback: %s\n", r.fallback.c_str());
    if (!r.fio_errors.empty()) {
      std::printf("          fio failed %zu time(s): %s\n", r.fio_errors.size(),
                  r.fio_errors.back().c_str());
    }
    const double disk = metrics::median(r.disk_read_bytes).value_or(0);
    std::printf(
        "          disk read %.2f GB/s (diskstats, window edges; %.2f bytes per KV byte), CPU %.2f "
        "core-s machine / %.2f core-s kvtier per restore\n",
        disk / p50 / 1e9, disk / static_cast<double>(r.bytes_per_session),
        metrics::median(r.machine_core_s).value_or(0),
        metrics::median(r.process_core_s).value_or(0));
    out["paths"].push_back({{"path", r.path},
                            {"io_engine", r.io_engine},
                            {"fallback", r.fallback},
                            {"restore_seconds", r.seconds},
                            {"raw_read_seconds", r.ceiling_seconds},
                            {"fio_seconds", fio_timed},
                            {"fio_failures", r.fio_errors.size()},
                            {"kv_bytes_per_session", r.bytes_per_session},
                            {"read_bytes_per_session", r.read_bytes_per_session},
                            {"disk_read_bytes", r.disk_read_bytes},
                            {"machine_core_seconds", r.machine_core_s},
                            {"process_core_seconds", r.process_core_s},
                            {"p50_ms", p50 * 1e3},
                            {"gb_per_s", gbs},
                            {"raw_read_gb_per_s", ceiling_gbs},
                            {"ratio_to_raw_read", ratio},
                            {"fio_gb_per_s", has_fio ? nlohmann::ordered_json(fio_gbs) : nullptr},
                            {"ratio_to_fio", has_fio ? nlohmann::ordered_json(fio_ratio) : nullptr},
                            {"verified", r.verified}});
    if (!r.verified) rc = 1;
  }
  if (!bench.json.empty()) {
    std::ofstream(bench.json) << out.dump(2) << "\n";
    std::printf("\nresults written to %s\n", bench.json.c_str());
  }
  return rc;
}

}  // namespace kvtier::cli
