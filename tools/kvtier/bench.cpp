// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// kvtier bench: save synthetic sessions, then restore each over every requested I/O path with the
// page cache dropped, against the raw O_DIRECT read ceiling of the same files measured in the run.
#include "bench.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "synthetic.hpp"

namespace kvtier::cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

struct PathResult {
  std::string path;
  std::string io_engine;
  std::string fallback;
  std::vector<double> seconds;
  uint64_t bytes_per_session = 0;
  uint64_t extents = 0;
  bool verified = true;
};

Result<std::unique_ptr<Engine>> open_with(StoreFlags flags, const std::string& io) {
  flags.io = io;
  auto options = flags.options(true);
  if (!options) return fail(options.error());
  return Engine::open(*options);
}

Status save_sessions(const StoreFlags& flags, const BenchFlags& bench, nlohmann::ordered_json& out) {
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
  out["save"] = {{"bytes", total}, {"seconds", save_seconds}, {"gb_per_s", total / save_seconds / 1e9}};
  std::printf("save      %s in %.2f s = %.2f GB/s (%s)\n", human_bytes(total).c_str(), save_seconds,
              total / save_seconds / 1e9, (*engine)->stats().io_engine.c_str());
  return {};
}

Result<double> read_ceiling(const StoreFlags& flags) {
  auto engine = open_with(flags, "direct");
  if (!engine) return fail(engine.error());
  auto c = (*engine)->measure_read_ceiling();
  if (!c) return fail(c.error());
  return static_cast<double>(c->bytes) / c->seconds;
}

Result<PathResult> restore_sessions(const StoreFlags& flags, const BenchFlags& bench, const std::string& io) {
  auto engine = open_with(flags, io);
  if (!engine) return fail(engine.error());
  PathResult r;
  r.path = io;
  r.io_engine = (*engine)->stats().io_engine;
  r.fallback = (*engine)->stats().io_fallback;
  const KvGeometry& g = (*engine)->geometry();
  r.bytes_per_session = g.bytes_for_tokens(bench.tokens);
  std::unique_ptr<std::byte[]> kv(new std::byte[r.bytes_per_session]);
  Progress progress(fmt::format("restore ({})", io));
  for (uint64_t s = 0; s < bench.sessions; ++s) {
    auto ids = synthetic::tokens(bench.seed + s, bench.tokens);
    if (Status st = (*engine)->drop_page_cache(); !st.ok()) return fail(st);
    auto start = Clock::now();
    auto restored = (*engine)->restore(ids, ChunkedKv{{kv.get(), r.bytes_per_session}, bench.tokens});
    if (!restored) return fail(restored.error());
    r.seconds.push_back(since(start));
    r.extents = restored->extents;
    const uint64_t bad = synthetic::first_mismatch(g, ids, {kv.get(), r.bytes_per_session}, bench.tokens);
    if (restored->tokens_restored != bench.tokens || bad != bench.tokens) r.verified = false;
    progress.update(s + 1, bench.sessions);
  }
  progress.finish();
  return r;
}

void print_header(const StoreFlags& flags, const BenchFlags& bench, const Options& o) {
  std::printf("kvtier bench %s\n", KVTIER_VERSION_STRING);
#ifndef NDEBUG
  std::printf("WARNING: built without NDEBUG (debug build): figures are not representative\n");
#endif
  std::printf("geometry  %s (%s per token on this rank)\n", o.geometry.describe().c_str(),
              human_bytes(static_cast<double>(o.geometry.bytes_per_token())).c_str());
  std::printf("workload  %llu sessions x %llu tokens = %s each; paths: %s\n",
              static_cast<unsigned long long>(bench.sessions), static_cast<unsigned long long>(bench.tokens),
              human_bytes(static_cast<double>(o.geometry.bytes_for_tokens(bench.tokens))).c_str(),
              bench.paths.c_str());
  std::printf("store     %s (device: host-emulated; KV lands in host memory)\n", flags.root.c_str());
}

}  // namespace

int run_bench(StoreFlags flags, const BenchFlags& bench) {
  if (bench.sessions == 0 || bench.tokens == 0) {
    return report({ErrorCode::kInvalidArgument, "--sessions and --tokens must be > 0"}, "bench");
  }
  flags.root = fmt::format("{}/bench-{}", flags.root, ::getpid());
  auto options = flags.options(true);
  if (!options) return report(options.error(), "bench");
  if (options->capacity_bytes == 0) {
    // Room for every session plus one segment of slack, so the benchmark never evicts.
    const uint64_t need = options->geometry.bytes_for_tokens(bench.tokens) * bench.sessions;
    flags.capacity = std::to_string(need + need / 8 + (uint64_t{2} << 30));
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
  auto before = read_ceiling(flags);
  if (!before) {
    cleanup();
    return report(before.error(), "bench read ceiling");
  }
  std::vector<PathResult> results;
  std::stringstream paths(bench.paths);
  for (std::string io; std::getline(paths, io, ',');) {
    auto r = restore_sessions(flags, bench, io);
    if (!r) {
      cleanup();
      return report(r.error(), fmt::format("bench restore ({})", io));
    }
    results.push_back(std::move(*r));
  }
  auto after = read_ceiling(flags);
  cleanup();
  if (!after) return report(after.error(), "bench read ceiling");
  // The disk is shared and noisy: take the better of the two ceiling runs, so ratios are not flattered.
  const double ceiling = std::max(*before, *after);
  std::printf("ceiling   raw O_DIRECT read of the same files: %.2f GB/s (runs: %.2f, %.2f)\n\n",
              ceiling / 1e9, *before / 1e9, *after / 1e9);
  std::printf("%-9s %-22s %10s %10s %9s %9s %8s %s\n", "path", "io engine", "p50 ms", "p99 ms", "GB/s",
              "ceiling", "extents", "verified");
  out["ceiling_gb_per_s"] = ceiling / 1e9;
  for (const PathResult& r : results) {
    const double p50 = percentile(r.seconds, 0.5);
    const double gbs = static_cast<double>(r.bytes_per_session) / p50 / 1e9;
    std::printf("%-9s %-22s %10.1f %10.1f %9.2f %8.2fx %8llu %s\n", r.path.c_str(), r.io_engine.c_str(),
                p50 * 1e3, percentile(r.seconds, 0.99) * 1e3, gbs, gbs * 1e9 / ceiling,
                static_cast<unsigned long long>(r.extents), r.verified ? "byte-exact" : "MISMATCH");
    if (!r.fallback.empty()) std::printf("          fallback: %s\n", r.fallback.c_str());
    out["paths"].push_back({{"path", r.path}, {"io_engine", r.io_engine}, {"fallback", r.fallback},
                            {"restore_seconds", r.seconds}, {"p50_ms", p50 * 1e3},
                            {"gb_per_s", gbs}, {"ratio_to_ceiling", gbs * 1e9 / ceiling},
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
