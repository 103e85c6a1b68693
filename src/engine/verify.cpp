// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::verify: every stored record read through the read route and the POSIX channel, checked
// on the host, re-read before it is dropped.
#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {

Result<VerifyReport> Engine::Impl::verify(const ProgressFn& progress) {
  std::vector<LocatedRecord> all = store_->all_records();
  VerifyReport report;
  if (all.empty()) return report;
  KVTIER_ASSIGN_OR_RETURN(ReadOutcome out,
                          read_route_->read(kit_->posix_channel(), all, nullptr, {}, progress));
  counters_.staging_bytes_read += out.bytes;
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

}  // namespace kvtier
