// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "io/read_probe.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"
#include "io/io_engine.hpp"
#include "io/pipeline.hpp"

namespace kvtier {
namespace {

class Discard final : public PieceSink {};

struct Trial {
  ReadPattern pattern;
  double first = 0;
  double second = 0;
};

/// Reads `bytes` of the file (round and round) in `pattern`, through slots carved from `memory`.
Result<double> time_pattern(int fd, uint64_t file_bytes, ReadPattern pattern, uint64_t bytes,
                            const ProbeConfig& config, std::span<std::byte> memory,
                            std::string& fallback) {
  const uint64_t request = pattern.request_bytes;
  const uint64_t usable = file_bytes / request * request;
  const uint64_t want = std::max(bytes, 4 * pattern.staging_bytes());
  const uint64_t count = (want + request - 1) / request;
  std::vector<Piece> pieces(count);
  for (uint64_t i = 0; i < count; ++i) {
    pieces[i] = {fd, (i * request) % usable, pattern.request_bytes};
  }
  std::vector<std::span<std::byte>> slots;
  for (uint32_t s = 0; s < pattern.in_flight; ++s) {
    slots.push_back(memory.subspan(s * request, request));
  }
  // Registered like a restore's staging, so the probe pays what a restore pays per request.
  auto engine = make_io_engine(config.path, pattern.in_flight, fallback, slots);
  Discard sink;
  const auto start = std::chrono::steady_clock::now();
  KVTIER_TRY(run_pipeline(*engine, pieces, slots, /*write=*/false, sink));
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return static_cast<double>(count * request) / std::max(took.count(), 1e-9);
}

std::vector<ReadPattern> sweep_of(uint64_t file_bytes, const ProbeConfig& config) {
  std::vector<ReadPattern> out;
  for (uint32_t size : config.request_sizes) {
    if (size == 0 || size % AlignedBuffer::kAlignment != 0 || size > file_bytes) continue;
    for (uint32_t depth : config.in_flight) {
      const ReadPattern p{size, depth};
      if (depth > 0 && p.staging_bytes() <= config.max_staging_bytes) out.push_back(p);
    }
  }
  return out;
}

double mean(const Trial& t) { return t.second > 0 ? (t.first + t.second) / 2 : t.first; }

ReadPattern choose(std::vector<Trial>& trials, double tie) {
  const double top = mean(*std::max_element(trials.begin(), trials.end(),
                                            [](auto& a, auto& b) { return mean(a) < mean(b); }));
  ReadPattern best{};
  for (const Trial& t : trials) {
    if (mean(t) < top * (1 - tie)) continue;
    const bool smaller =
        best.in_flight == 0 || t.pattern.staging_bytes() < best.staging_bytes() ||
        (t.pattern.staging_bytes() == best.staging_bytes() && t.pattern.in_flight < best.in_flight);
    if (smaller) best = t.pattern;
  }
  return best;
}

}  // namespace

Result<ProbeReport> probe_read_patterns(int fd, uint64_t file_bytes, const ProbeConfig& config) {
  const std::vector<ReadPattern> sweep = sweep_of(file_bytes, config);
  KVTIER_EXPECTS(!sweep.empty(), "read probe: no request size of the sweep fits a file of " +
                                     std::to_string(file_bytes) +
                                     " bytes within the staging bound");
  uint64_t most = 0;
  for (const ReadPattern& p : sweep) most = std::max(most, p.staging_bytes());
  AlignedBuffer memory(most);
  ProbeReport report;
  std::vector<Trial> trials;
  for (const ReadPattern& p : sweep) {
    KVTIER_ASSIGN_OR_RETURN(double rate, time_pattern(fd, file_bytes, p, config.bytes_per_trial,
                                                      config, memory.span(), report.fallback));
    trials.push_back({p, rate, 0});
    report.rates.push_back({p, rate});
  }
  std::vector<Trial*> order;
  for (Trial& t : trials) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](Trial* a, Trial* b) { return a->first > b->first; });
  // Only confirmed trials are ranked (one lucky run on a noisy drive does not decide); with no
  // confirmations asked for, every trial is.
  const size_t confirmed =
      config.confirm == 0 ? order.size() : std::min(config.confirm, order.size());
  for (size_t i = 0; i < std::min(config.confirm, order.size()); ++i) {
    Trial& t = *order[i];
    KVTIER_ASSIGN_OR_RETURN(t.second,
                            time_pattern(fd, file_bytes, t.pattern, config.bytes_per_trial, config,
                                         memory.span(), report.fallback));
    report.rates.push_back({t.pattern, t.second});
  }
  std::vector<Trial> ranked;
  for (size_t i = 0; i < confirmed; ++i) ranked.push_back(*order[i]);
  report.best = choose(ranked, config.tie);
  return report;
}

}  // namespace kvtier
