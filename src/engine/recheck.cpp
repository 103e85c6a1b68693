// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Re-read before drop. A record that fails a check on a restore is read once more through another
// path (a plain buffered pread of its segment file, verified on the host: none of the restore's I/O
// engine, staging, cuFile or device code) before it is called corrupt. A bug or a transient fault
// in one data path then costs a miss, never the record.
#include <fcntl.h>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"
#include "common/checksum.hpp"
#include "common/posix.hpp"
#include "engine/read_route.hpp"

namespace kvtier {

std::vector<RecheckOutcome> Engine::Impl::recheck(std::span<const LocatedRecord> records,
                                                  std::span<const uint64_t> first_tokens,
                                                  const KvTarget* destination) {
  std::vector<RecheckOutcome> out(records.size(), RecheckOutcome::kUnread);
  AlignedBuffer buffer;
  for (size_t i = 0; i < records.size(); ++i) {
    const RecordMeta& m = records[i].meta;
    if (buffer.size() < m.record_bytes()) buffer = AlignedBuffer(m.record_bytes());
    const std::span<std::byte> bytes = buffer.span().first(m.record_bytes());
    // Buffered on purpose: the page cache is the path the failed read did not take.
    if (Status st = store_->read_bytes(*records[i].file, bytes, m.offset, /*buffered=*/true);
        !st.ok()) {
      KVTIER_LOG(log_, kWarn, "re-read of a failed record: {}", st.to_string());
      continue;  // no evidence either way: kept, a miss
    }
    const std::span<const std::byte> payload = bytes.subspan(kBlock, m.payload_bytes);
    if (!header_matches(bytes.first(kBlock), m, options_.geometry) ||
        kvsum::of(payload.data(), payload.size()) != m.payload_checksum) {
      out[i] = RecheckOutcome::kCorrupt;
      continue;
    }
    out[i] = RecheckOutcome::kIntact;
    if (destination == nullptr) continue;
    // Verified here; placed through the device and verified again where it lands.
    auto placed =
        read_payloads(records.subspan(i, 1), {payload}, first_tokens.subspan(i, 1), *destination);
    const Status failed = placed ? placed->status : placed.error();
    if (!failed.ok() || placed->state(0, m) != RecordState::kIntact) {
      KVTIER_LOG(log_, kWarn, "a record verified on its re-read failed again where it landed: {}",
                 failed.ok() ? "checksum mismatch on the device" : failed.to_string());
      out[i] = RecheckOutcome::kIntactNotPlaced;
    }
  }
  return out;
}

}  // namespace kvtier
