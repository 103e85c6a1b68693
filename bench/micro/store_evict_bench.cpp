// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Saving into a full store of many small records: every segment's worth of new records evicts one
// old segment, whose records must be found and dropped from the index. Measures what that costs as
// the number of live records grows (the store lives in /dev/shm so the bytes written are cheap and
// the bookkeeping shows).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kvtier/engine.hpp"
#include "store/record_format.hpp"
#include "synthetic.hpp"

namespace kvtier {
namespace {

constexpr uint32_t kChunk = 16;
constexpr uint64_t kSegment = uint64_t{1} << 20;

std::string bench_root() {
  std::string base = std::filesystem::is_directory("/dev/shm")
                         ? "/dev/shm"
                         : std::filesystem::temp_directory_path().string();
  return base + "/kvtier-evict-bench-" + std::to_string(::getpid());
}

void BM_SaveAtCapacity(benchmark::State& state) {
  const uint64_t live_records = static_cast<uint64_t>(state.range(0));
  const std::string root = bench_root();
  std::filesystem::remove_all(root);
  Options o;
  o.root = root;
  o.geometry = *geometry_for("tiny", 0, 1, kChunk);
  o.segment_bytes = kSegment;
  o.io_request_bytes = kSegment;
  o.staging_bytes = uint64_t{4} << 20;
  o.log_level = LogLevel::kOff;
  // One session fills one segment: a chunk's record is its header block plus padded payload.
  const RecordMeta chunk{.payload_bytes = o.geometry.bytes_for_tokens(kChunk)};
  const uint64_t record = chunk.record_bytes();
  const uint64_t per_segment = kSegment / record;
  const uint64_t session_tokens = per_segment * kChunk;
  o.capacity_bytes = (live_records / per_segment + 1) * kSegment;
  auto e = Engine::open(o);
  if (!e) {
    state.SkipWithError(e.error().message().c_str());
    return;
  }
  synthetic::HostKv kv(o.geometry, session_tokens);
  uint64_t seed = 100;
  auto save_one = [&] {
    auto tokens = synthetic::tokens(seed++, session_tokens);
    synthetic::fill_kv(o.geometry, tokens, kv.span(), session_tokens);
    return (*e)->save(tokens, kv.view);
  };
  while ((*e)->stats().records < live_records) {
    if (!save_one().has_value()) {
      state.SkipWithError("filling the store failed");
      return;
    }
  }
  const uint64_t evicted_before = (*e)->stats().evicted_segments;
  for (auto _ : state) {
    if (!save_one().has_value()) {
      state.SkipWithError("save failed");
      break;
    }
  }
  const Stats s = (*e)->stats();
  state.counters["live_records"] = static_cast<double>(s.records);
  state.counters["evictions_per_save"] = static_cast<double>(s.evicted_segments - evicted_before) /
                                         static_cast<double>(state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * per_segment));
  e->reset();
  std::filesystem::remove_all(root);
}
BENCHMARK(BM_SaveAtCapacity)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(300'000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvtier
