// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Re-read before drop. A record that fails a check on a restore is read once more through another
// path (a plain buffered pread of its segment file, verified on the host: none of the restore's I/O
// engine, staging, cuFile or device code) before it is called corrupt. A bug or a transient fault
// in one data path then costs a miss, never the record.
#include <fcntl.h>

#include <fmt/format.h>

#include "common/aligned_buffer.hpp"
#include "common/checksum.hpp"
#include "common/posix.hpp"
#include "common/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {

Result<Engine::Impl::Placed> Engine::Impl::place_payloads(const KvTarget& destination,
                                                          std::span<const PayloadToPlace> payloads,
                                                          size_t records, size_t slots) {
  KVTIER_ASSIGN_OR_RETURN(Device * device, data_->device_for(destination.kind));
  const uint64_t piece = data_->staging().slot_bytes();
  KVTIER_ASSIGN_OR_RETURN(auto transfer, device->begin(destination, records, slots, piece));
  size_t next_slot = 0;
  for (const PayloadToPlace& p : payloads) {
    for (uint64_t at = 0; at < p.payload.size(); at += piece) {
      const uint64_t n = std::min<uint64_t>(piece, p.payload.size() - at);
      const size_t slot = next_slot++ % slots;
      KVTIER_TRY(transfer->release(slot));
      const PieceSpan span{0, at, n, p.first_token, p.token_count, p.record};
      KVTIER_TRY(transfer->scatter(slot, p.payload.subspan(at, n), std::span(&span, 1)));
    }
  }
  Placed placed;
  KVTIER_ASSIGN_OR_RETURN(placed.sums, transfer->finish());
  counters_.device_copy_bytes += transfer->device_copy_bytes();
  placed.host_bytes = transfer->host_memory_bytes();
  return placed;
}

std::vector<RecheckOutcome> Engine::Impl::recheck(std::span<const LocatedRecord> records,
                                                  std::span<const uint64_t> first_tokens,
                                                  const KvTarget* destination) {
  std::vector<RecheckOutcome> out(records.size(), RecheckOutcome::kUnread);
  AlignedBuffer buffer;
  for (size_t i = 0; i < records.size(); ++i) {
    const RecordMeta& m = records[i].meta;
    // Buffered on purpose: the page cache is the path the failed read did not take.
    auto fd = open_file(records[i].file->path, O_RDONLY | O_CLOEXEC);
    if (!fd) {
      KVTIER_LOG(log_, kWarn, "re-read of a failed record: {}", fd.error().to_string());
      continue;  // no evidence either way: kept, a miss
    }
    if (buffer.size() < m.record_bytes()) buffer = AlignedBuffer(m.record_bytes());
    const std::span<std::byte> bytes = buffer.span().first(m.record_bytes());
    if (Status st = pread_full(fd->get(), bytes, m.offset); !st.ok()) {
      KVTIER_LOG(log_, kWarn, "re-read of a failed record: {}", st.to_string());
      continue;
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
    const PayloadToPlace place{payload, first_tokens[i], m.token_count, 0};
    auto placed = place_payloads(*destination, std::span(&place, 1), 1, 1);
    if (!placed || kvsum::finish(placed->sums[0], m.payload_bytes) != m.payload_checksum) {
      KVTIER_LOG(log_, kWarn, "a record verified on its re-read failed again where it landed: {}",
                 placed ? "checksum mismatch on the device" : placed.error().to_string());
      out[i] = RecheckOutcome::kIntactNotPlaced;
    }
  }
  return out;
}

}  // namespace kvtier
