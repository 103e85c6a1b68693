// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The records of one write through the write route (write_route.cpp): a save's, or records moved
// into the drives from another tier.
#pragma once

#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "engine/engine_impl.hpp"

namespace kvtier {

struct Engine::Impl::SaveBatch {
  std::vector<RecordMeta> records;  // placed by place_batch()
  std::vector<uint64_t> first_tokens;
  std::vector<Placement> placements;
  std::vector<LocatedRecord> located;  // records with their files
  IoPlan plan;
  std::vector<std::optional<DramTier::Reservation>> tier;  // write-through slabs, per record
};

/// Payloads already in host memory (`payloads[i]` record i's: images another tier handed over,
/// or a save's coded payloads), gathered into write pieces the way a device gathers them from KV
/// memory.
class ImagePayloads final : public DeviceTransfer {
 public:
  explicit ImagePayloads(std::vector<std::span<const std::byte>> payloads)
      : payloads_(std::move(payloads)) {}
  Status gather(size_t /*slot*/, std::span<std::byte> piece,
                std::span<const PieceSpan> spans) override {
    for (const PieceSpan& sp : spans) {
      std::memcpy(piece.data() + sp.piece_offset, payloads_[sp.record].data() + sp.payload_offset,
                  sp.bytes);
    }
    return {};
  }
  Status scatter(size_t, std::span<const std::byte>, std::span<const PieceSpan>) override {
    return {ErrorCode::kNotSupported, "record images are a write's source only"};
  }
  Status release(size_t /*slot*/) override { return {}; }
  Result<std::vector<uint64_t>> finish() override { return std::vector<uint64_t>{}; }
  Result<std::vector<uint64_t>> record_sums(std::span<const RecordRange>) override {
    return fail(ErrorCode::kNotSupported, "record images come with their checksums");
  }

 private:
  std::vector<std::span<const std::byte>> payloads_;
};

}  // namespace kvtier
