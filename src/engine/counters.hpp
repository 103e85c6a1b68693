// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the engine and its remote tier count, made from the one list of Stats' fields
// (KVTIER_STATS_FIELDS, kvtier/stats.hpp): for each field a part keeps, an atomic (a counter) or a
// LatencyRecorder (a histogram) of the same name, and fill() to copy them into Stats. A new
// counter is one line in that list; gauges and texts are read from their part when stats are taken.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "kvtier/stats.hpp"

namespace kvtier {

/// Latencies of one kind of operation, recorded from any thread.
class LatencyRecorder {
 public:
  void record(double seconds) {
    size_t i = 0;
    while (i < LatencyHistogram::kBounds.size() && seconds > LatencyHistogram::kBounds[i]) ++i;
    if (i < buckets_.size()) ++buckets_[i];
    ++count_;
    nanos_ += static_cast<uint64_t>(seconds * 1e9);
  }
  [[nodiscard]] LatencyHistogram snapshot() const {
    LatencyHistogram h;
    uint64_t running = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) h.cumulative[i] = running += buckets_[i];
    h.count = count_;
    h.sum_seconds = static_cast<double>(nanos_) / 1e9;
    return h;
  }

 private:
  std::array<std::atomic<uint64_t>, LatencyHistogram::kBounds.size()>
      buckets_{};  // per bucket, not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> nanos_{0};
};

/// Records the time from its construction to its destruction.
class LatencyTimer {
 public:
  explicit LatencyTimer(LatencyRecorder& r) : r_(r), start_(std::chrono::steady_clock::now()) {}
  ~LatencyTimer() {
    r_.record(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  LatencyTimer(const LatencyTimer&) = delete;
  LatencyTimer& operator=(const LatencyTimer&) = delete;

 private:
  LatencyRecorder& r_;
  std::chrono::steady_clock::time_point start_;
};

// The member that keeps a field of `kind`, and the statement that copies it into `stats`.
#define KVTIER_KEPT_MEMBER_(kind, name) KVTIER_KEPT_MEMBER_##kind##_(name)
#define KVTIER_KEPT_MEMBER_counter_(name) std::atomic<uint64_t> name{0};
#define KVTIER_KEPT_MEMBER_histogram_(name) LatencyRecorder name;
#define KVTIER_KEPT_MEMBER_gauge_(name)
#define KVTIER_KEPT_MEMBER_text_(name)
#define KVTIER_KEPT_FILL_(kind, name) KVTIER_KEPT_FILL_##kind##_(name)
#define KVTIER_KEPT_FILL_counter_(name) stats.name = name;
#define KVTIER_KEPT_FILL_histogram_(name) stats.name = name.snapshot();
#define KVTIER_KEPT_FILL_gauge_(name)
#define KVTIER_KEPT_FILL_text_(name)
// KVTIER_<PART>_KEEPS_<keeper>(x): x for the fields whose keeper is that part, nothing otherwise.
#define KVTIER_ENGINE_KEEPS_engine(x) x
#define KVTIER_ENGINE_KEEPS_path(x)
#define KVTIER_ENGINE_KEEPS_dram(x)
#define KVTIER_ENGINE_KEEPS_store(x)
#define KVTIER_ENGINE_KEEPS_remote(x)
#define KVTIER_REMOTE_KEEPS_engine(x)
#define KVTIER_REMOTE_KEEPS_path(x)
#define KVTIER_REMOTE_KEEPS_dram(x)
#define KVTIER_REMOTE_KEEPS_store(x)
#define KVTIER_REMOTE_KEEPS_remote(x) x

/// The fields whose keeper is `engine` (Engine::Impl): counted from any thread.
struct EngineCounters {
#define KVTIER_MEMBER_(kind, keeper, name, help) \
  KVTIER_ENGINE_KEEPS_##keeper(KVTIER_KEPT_MEMBER_(kind, name))
  KVTIER_STATS_FIELDS(KVTIER_MEMBER_)
#undef KVTIER_MEMBER_
  void fill(Stats& stats) const {
#define KVTIER_FILL_(kind, keeper, name, help) \
  KVTIER_ENGINE_KEEPS_##keeper(KVTIER_KEPT_FILL_(kind, name))
    KVTIER_STATS_FIELDS(KVTIER_FILL_)
#undef KVTIER_FILL_
  }
};

/// The fields whose keeper is `remote` (RemoteTier): counted from any thread.
struct RemoteCounters {
#define KVTIER_MEMBER_(kind, keeper, name, help) \
  KVTIER_REMOTE_KEEPS_##keeper(KVTIER_KEPT_MEMBER_(kind, name))
  KVTIER_STATS_FIELDS(KVTIER_MEMBER_)
#undef KVTIER_MEMBER_
  void fill(Stats& stats) const {
#define KVTIER_FILL_(kind, keeper, name, help) \
  KVTIER_REMOTE_KEEPS_##keeper(KVTIER_KEPT_FILL_(kind, name))
    KVTIER_STATS_FIELDS(KVTIER_FILL_)
#undef KVTIER_FILL_
  }
};

}  // namespace kvtier
