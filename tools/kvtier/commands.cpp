// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// kvtier put / get / ls / stat / verify.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "cli_common.hpp"
#include "synthetic.hpp"

namespace kvtier::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// "29 ms" under a second ("0.0 s" said nothing of a 29 ms save), "12.3 s" above.
std::string duration_text(double seconds) {
  if (seconds < 1) return fmt::format("{:.{}f} ms", seconds * 1e3, seconds < 0.01 ? 1 : 0);
  return fmt::format("{:.1f} s", seconds);
}

/// Opens the store for a command that reads it (never creates one). `snapshot`: without its lock,
/// so that ls and stat work beside a writer and never keep one out.
Result<std::unique_ptr<Engine>> open_existing(const StoreFlags& flags, bool snapshot,
                                              bool tune_at_open = true) {
  auto options = flags.options(false);
  if (!options) return fail(options.error());
  options->read_only = snapshot;
  options->tune = tune_at_open;
  KVTIER_TRY(check_store_root(options->root));
  for (const std::string& extra : options->extra_roots) KVTIER_TRY(check_store_root(extra));
  return Engine::open(*options);
}

/// A line on stderr saying what a long step of a command is doing (stderr is line-buffered).
void say(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

/// One session's KV in host memory, zeroed on every core: value-initialising it (as
/// synthetic::HostKv does) zeroes ~10 GB on one thread at 100K tokens, many seconds of silence
/// before any work. Zeroed rather than left to fault in later so that a restore's time does not
/// include faulting in its destination (a serving engine's KV cache is resident).
struct SessionKv {
  SessionKv(const KvGeometry& g, uint64_t tokens)
      : bytes(g.bytes_for_tokens(tokens)),
        data(new std::byte[bytes]),
        view{{data.get(), bytes}, tokens} {
    synthetic::parallel_tokens(bytes, [this](uint64_t first, uint64_t last) {
      std::memset(data.get() + first, 0, last - first);
    });
  }
  uint64_t bytes;
  std::unique_ptr<std::byte[]> data;
  ChunkedKv view;
};

/// The host buffer of one session, refused before anything is allocated (or a store created) when
/// it cannot fit in memory: all of it is touched, so an oversized one would otherwise die of
/// std::bad_alloc or the OOM killer.
Result<std::unique_ptr<SessionKv>> session_kv(const KvGeometry& g, uint64_t tokens) {
  const uint64_t bytes = g.bytes_for_tokens(tokens) + tokens * sizeof(Token);
  const std::string what = fmt::format("--tokens {}: a session's KV and token ids", tokens);
  if (Status st = check_host_memory(bytes, what); !st.ok()) return fail(st);
  say(fmt::format("allocating {} of host memory for a session's KV",
                  human_bytes(static_cast<double>(bytes))));
  try {
    return std::make_unique<SessionKv>(g, tokens);
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kNoSpace, fmt::format("{}: allocating {} of host memory failed", what,
                                                 human_bytes(static_cast<double>(bytes))));
  }
}

/// put: the session buffer, then the engine, so that a put that cannot run creates no store.
/// get: the engine first, which says cheaply when there is no such store (or another geometry),
/// before a session's buffer is allocated.
Result<std::pair<std::unique_ptr<SessionKv>, std::unique_ptr<Engine>>> prepare(
    const StoreFlags& flags, bool create, uint64_t tokens) {
  auto options = flags.options(create);
  if (!options) return fail(options.error());
  Result<std::unique_ptr<SessionKv>> kv = std::unique_ptr<SessionKv>();
  if (create) {
    kv = session_kv(options->geometry, tokens);
    if (!kv) return fail(kv.error());
  }
  KVTIER_TRY(create ? make_dirs(options->root) : check_store_root(options->root));
  for (const std::string& extra : options->extra_roots) {
    KVTIER_TRY(create ? make_dirs(extra) : check_store_root(extra));
  }
  auto engine = Engine::open(*options);
  if (!engine) return fail(engine.error());
  if (!create) {
    kv = session_kv((*engine)->geometry(), tokens);
    if (!kv) return fail(kv.error());
  }
  return std::pair(std::move(*kv), std::move(*engine));
}

/// Why a get restored fewer tokens than asked for, on stderr (the restore line on stdout only
/// counts them): nothing stored under these tokens, a shorter stored prefix, or a record that
/// failed its checks (`problem`, the engine's reason).
void explain_short_restore(uint64_t session, uint64_t restored, uint64_t tokens,
                           const std::string& problem, const Engine& engine) {
  const std::string what = fmt::format("kvtier: get seed={}: ", session);
  const std::string& store = engine.store_dir();
  if (!problem.empty()) {
    say(fmt::format("{}{} of {} tokens restored: {}", what, restored, tokens, problem));
    return;
  }
  std::string why =
      restored == 0 ? fmt::format("not found: no stored prefix of these tokens in {}", store)
                    : fmt::format("partial: the store holds the first {} of these {} tokens ({})",
                                  restored, tokens, store);
  // What the store's state adds, as Python's restore()["problem"] says it.
  const Stats s = engine.stats();
  if (s.drives_offline > 0) {
    why += fmt::format("; {} of the store's drives offline, whose {} records are misses: {}",
                       s.drives_offline, s.offline_records, s.drive_problem);
  }
  if (s.remote != "off") {
    why += s.remote == "ok" ? "; the remote tier did not hold the rest either"
                            : "; the remote tier was asked for the rest: " + s.remote;
  }
  say(what + why);
}

}  // namespace

int run_put(const StoreFlags& flags, uint64_t tokens, uint64_t seed, uint64_t sessions,
            bool remote_wait) {
  auto prepared = prepare(flags, true, tokens);
  if (!prepared) return report(prepared.error(), "put");
  auto& [kv, engine] = *prepared;
  const KvGeometry& g = engine->geometry();
  RemotePut remote{remote_wait, 0, tokens, seed, sessions};
  for (uint64_t s = 0; s < sessions; ++s) {
    const uint64_t session = seed + s;
    const auto begin = Clock::now();
    say(fmt::format(
        "put seed={}: making {} of synthetic KV from the token ids (a prefill stand-in)", session,
        human_bytes(static_cast<double>(kv->bytes))));
    auto ids = synthetic::tokens(session, tokens);
    synthetic::fill_kv(g, ids, {kv->data.get(), kv->bytes}, tokens);
    say(fmt::format("put seed={}: made in {}; saving", session,
                    duration_text(seconds_since(begin))));
    const auto start = Clock::now();
    auto saved = engine->save(ids, kv->view);
    if (!saved) return report(saved.error(), fmt::format("put seed={}", session));
    const double t = seconds_since(start);
    std::printf(
        "put seed=%llu tokens=%llu chunks written=%llu present=%llu %s in %.3f s (%s/s); %s in "
        "all\n",
        static_cast<unsigned long long>(session), static_cast<unsigned long long>(tokens),
        static_cast<unsigned long long>(saved->chunks_written),
        static_cast<unsigned long long>(saved->chunks_present),
        human_bytes(static_cast<double>(saved->bytes_written)).c_str(), t,
        human_bytes(static_cast<double>(saved->bytes_written) / t).c_str(),
        duration_text(seconds_since(begin)).c_str());
    remote.records_saved += saved->chunks_written;
  }
  return flags.remote.empty() ? 0 : finish_remote_put(*engine, remote);
}

int run_get(const StoreFlags& flags, uint64_t tokens, uint64_t seed, uint64_t sessions) {
  // With a remote tier a node's first get makes its store, as put would: what it restores from the
  // cluster is kept there. Without one, a missing store can hold nothing: an error.
  auto prepared = prepare(flags, !flags.remote.empty(), tokens);
  if (!prepared) return report(prepared.error(), "get");
  auto& [kv, engine] = *prepared;
  const KvGeometry& g = engine->geometry();
  int rc = 0;
  for (uint64_t s = 0; s < sessions; ++s) {
    const uint64_t session = seed + s;
    const auto begin = Clock::now();
    auto ids = synthetic::tokens(session, tokens);
    say(fmt::format("get seed={}: restoring up to {}", session,
                    human_bytes(static_cast<double>(kv->bytes))));
    const auto start = Clock::now();
    auto restored = engine->restore(ids, kv->view);
    if (!restored) return report(restored.error(), fmt::format("get seed={}", session));
    const double t = seconds_since(start);
    const uint64_t n = restored->tokens_restored;
    say(fmt::format("get seed={}: restored in {}; checking every byte against the generator",
                    session, duration_text(t)));
    const uint64_t bad =
        synthetic::first_mismatch(g, std::span(ids).first(n), {kv->data.get(), kv->bytes}, tokens);
    std::printf(
        "get seed=%llu restored %llu/%llu tokens in %.3f s (%s/s, %llu extents)%s%s; %s in "
        "all\n",
        static_cast<unsigned long long>(session), static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(tokens), t,
        human_bytes(static_cast<double>(g.bytes_for_tokens(n)) / t).c_str(),
        static_cast<unsigned long long>(restored->extents),
        bad < n ? fmt::format(" MISMATCH at token {}", bad).c_str() : "",
        restored->problem.empty() ? "" : fmt::format(" ({})", restored->problem).c_str(),
        duration_text(seconds_since(begin)).c_str());
    if (n < tokens) explain_short_restore(session, n, tokens, restored->problem, *engine);
    if (bad < n || n < tokens) rc = 1;
  }
  return rc;
}

int run_ls(const StoreFlags& flags) {
  auto engine = open_existing(flags, true);
  if (!engine) return report(engine.error(), "ls");
  std::printf("%-10s %14s %14s %14s %9s %10s %5s  %s\n", "segment", "file bytes", "written",
              "live bytes", "records", "tokens", "drive", "directory");
  for (const SegmentInfo& s : (*engine)->segments()) {
    std::printf("%-10u %14llu %14llu %14llu %9llu %10llu %5u  %s\n", s.id,
                static_cast<unsigned long long>(s.file_bytes),
                static_cast<unsigned long long>(s.write_offset),
                static_cast<unsigned long long>(s.live_bytes),
                static_cast<unsigned long long>(s.records),
                static_cast<unsigned long long>(s.tokens), s.drive,
                s.dir.empty() ? "(drive not in --store)" : s.dir.c_str());
  }
  return 0;
}

namespace {

nlohmann::ordered_json tuning_json(const IoSettings& io) {
  nlohmann::ordered_json drives = nlohmann::ordered_json::array();
  for (const DriveTuningInfo& d : io.drives) {
    drives.push_back({{"dir", d.dir},
                      {"request_bytes", d.request_bytes},
                      {"in_flight", d.in_flight},
                      {"bytes_per_second", d.bytes_per_second},
                      {"state", d.state}});
  }
  return drives;
}

}  // namespace

int run_tune(const StoreFlags& flags) {
  // Not at open too: tune() probes every drive right after.
  auto engine = open_existing(flags, false, /*tune_at_open=*/false);
  if (!engine) return report(engine.error(), "tune");
  say("tune: probing each drive's read patterns on its own segment files (a few GB of reads each)");
  auto found = (*engine)->tune();
  if (!found) return report(found.error(), "tune");
  size_t tuned = 0;
  for (const DriveTuningInfo& d : found->drives) {
    if (d.request_bytes > 0) {
      ++tuned;
      std::printf("%s: %s x %u in flight, %s/s (%s)\n", d.dir.c_str(),
                  human_bytes(static_cast<double>(d.request_bytes)).c_str(), d.in_flight,
                  human_bytes(d.bytes_per_second).c_str(), d.state.c_str());
    } else {
      std::printf("%s: %s\n", d.dir.c_str(), d.state.c_str());
    }
  }
  std::printf("engines opened from now on: requests of %s, staging %s (%zu of %zu drives tuned)\n",
              human_bytes(static_cast<double>(found->request_bytes)).c_str(),
              human_bytes(static_cast<double>(found->staging_bytes)).c_str(), tuned,
              found->drives.size());
  for (const DriveTuningInfo& d : found->drives) {
    if (tuned == 0 && d.state.find("probe failed") != std::string::npos) {
      return report({ErrorCode::kIo, d.dir + ": " + d.state}, "tune");
    }
  }
  if (tuned == 0) {
    return report({ErrorCode::kNotFound,
                   "no drive could be tuned: each needs a segment with written data (save "
                   "sessions first)"},
                  "tune");
  }
  return 0;
}

int run_stat(const StoreFlags& flags, StatFormat format) {
  auto engine = open_existing(flags, true);
  if (!engine) return report(engine.error(), "stat");
  const Stats s = (*engine)->stats();
  if (format == StatFormat::kPrometheus) {
    const std::string label =
        fmt::format("store=\"{}\"", prometheus_label_value((*engine)->store_dir()));
    std::printf("%s", prometheus_text(s, label).c_str());
    return 0;
  }
  nlohmann::ordered_json j = {{"store", (*engine)->store_dir()},
                              {"geometry", (*engine)->geometry().describe()},
                              {"io_engine", s.io_engine},
                              {"io_fallback", s.io_fallback},
                              {"capacity_bytes", s.capacity_bytes},
                              {"segment_bytes", s.segment_bytes},
                              {"used_bytes", s.used_bytes},
                              {"live_bytes", s.live_bytes},
                              {"segments", s.segments},
                              {"records", s.records},
                              {"recovered_records", s.recovered_records},
                              {"dropped_at_open", s.dropped_at_open},
                              {"drives", s.drives},
                              {"drives_offline", s.drives_offline},
                              {"drives_out_of_placement", s.drives_out_of_placement},
                              {"offline_records", s.offline_records},
                              {"drive_problem", s.drive_problem}};
  const IoSettings io = (*engine)->io_settings();
  j["io_request_bytes"] = io.request_bytes;
  j["staging_bytes"] = io.staging_bytes;
  j["io_settings_from"] = io.source;
  j["drive_tuning"] = tuning_json(io);
  if (format == StatFormat::kJson) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  for (auto& [key, value] : j.items()) {
    std::printf("%-18s %s\n", key.c_str(),
                value.is_string() ? value.get<std::string>().c_str() : value.dump().c_str());
  }
  return 0;
}

int run_verify(const StoreFlags& flags) {
  auto engine = open_existing(flags, false);  // it drops the corrupt records it finds
  if (!engine) return report(engine.error(), "verify");
  Progress progress("verify");
  auto report_or = (*engine)->verify([&](uint64_t d, uint64_t t) { progress.update(d, t); });
  progress.finish();
  if (!report_or) return report(report_or.error(), "verify");
  for (const std::string& p : report_or->problems) std::printf("corrupt: %s\n", p.c_str());
  std::printf("verified %llu records (%s): %llu corrupt%s\n",
              static_cast<unsigned long long>(report_or->records_checked),
              human_bytes(static_cast<double>(report_or->bytes_checked)).c_str(),
              static_cast<unsigned long long>(report_or->corrupt_records),
              report_or->corrupt_records ? " (dropped from the index)" : "");
  return report_or->corrupt_records == 0 ? 0 : 1;
}

}  // namespace kvtier::cli
