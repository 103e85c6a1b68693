// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::verify (every stored record read and checked on the host) and the read ceiling (the same
// reads, the bytes discarded).
#include <chrono>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/read_route.hpp"
#include "engine/record_io.hpp"

namespace kvtier {

Result<VerifyReport> Engine::Impl::verify(const ProgressFn& progress) {
  std::vector<LocatedRecord> all = store_->all_records();
  VerifyReport report;
  if (all.empty()) return report;
  KVTIER_ASSIGN_OR_RETURN(ReadOutcome out,
                          read_records(data_->posix_source(), all, nullptr, progress));
  if (!out.status.ok()) return fail(out.status.with_context("verify"));
  std::vector<RecordState> states(all.size());
  for (size_t r = 0; r < all.size(); ++r) states[r] = out.state(r, all[r].meta);
  recheck_corrupt(all, {}, nullptr, states);
  std::vector<Key128> corrupt;
  for (size_t r = 0; r < all.size(); ++r) {
    const RecordMeta& m = all[r].meta;
    ++report.records_checked;
    report.bytes_checked += m.record_bytes();
    if (states[r] != RecordState::kCorrupt) continue;
    corrupt.push_back(m.key);
    report.problems.push_back(fmt::format(
        "segment {} offset {}: {} ({} tokens)", m.segment, m.offset,
        out.header[r] == HeaderState::kGood ? "payload checksum mismatch" : "bad header",
        m.token_count));
  }
  report.corrupt_records = corrupt.size();
  counters_.checksum_misses += corrupt.size();
  KVTIER_TRY(store_->drop(corrupt));
  return report;
}

Result<CeilingResult> Engine::Impl::measure_read_ceiling(std::span<const Token> tokens) {
  std::vector<LocatedRecord> all = tokens.empty() ? store_->all_records() : find_prefix(tokens);
  ByteSource& source = data_->posix_source();
  std::vector<RecordMeta> records;
  std::vector<int> fds;
  for (const LocatedRecord& r : all) {
    records.push_back(r.meta);
    fds.push_back(r.file->fd.get());
  }
  const IoPlan plan = plan_io(records, fds, source.staging().slot_bytes());
  RecordSink discard;
  StagingPool::Lease lease = source.staging().acquire(plan.pieces.size());
  auto start = std::chrono::steady_clock::now();
  KVTIER_TRY(source.read(all, plan.pieces, lease, discard, 0));
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return CeilingResult{plan.bytes, elapsed.count()};
}

}  // namespace kvtier
