// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one write route: build each piece in the channel's staging (host slots or device buffers):
// headers, payload gathered by the device (or copied from record images another tier handed
// over), padding; write; then the caller's fdatasync and journal commit.
#include "engine/write_route.hpp"

#include <array>
#include <cstring>

#include "api/try.hpp"
#include "engine/record_io.hpp"

namespace kvtier {
namespace {

/// What write piece `p` of `plan` holds: payload spans the device gathers from the source, record
/// headers encoded here, padding to clear. One description serves the POSIX path (filled into host
/// staging) and the GDS path (built in device memory).
struct WritePiece {
  struct alignas(8) HeaderBlock {
    std::array<std::byte, kBlock> bytes;
  };
  std::vector<PieceSpan> spans;
  std::vector<std::pair<uint64_t, std::span<const std::byte>>> headers;  // (offset in piece, bytes)
  std::vector<std::pair<uint64_t, uint64_t>> padding;  // (offset in piece, length)
  std::vector<HeaderBlock> blocks;                     // storage behind `headers`

  void describe(const IoPlan& plan, std::span<const RecordMeta> records,
                std::span<const uint64_t> first_tokens, const RecordShape& shape, const Key128& ns,
                size_t p) {
    spans.clear();
    headers.clear();
    padding.clear();
    const size_t first = plan.piece_records[p].first;
    blocks.resize(plan.piece_records[p].second - first);  // sized first: `headers` points into it
    for_each_region(
        plan, records, p, [&](size_t r, Region region, uint64_t at, uint64_t out, uint64_t n) {
          switch (region) {
            case Region::kHeader: {
              std::span<std::byte> block = blocks[r - first].bytes;
              encode_header(records[r], shape, ns, block);
              headers.emplace_back(out, block.subspan(at, n));
              return;
            }
            case Region::kPayload:
              spans.push_back(
                  {out, at, n, first_tokens[r], records[r].token_count, static_cast<uint32_t>(r)});
              return;
            case Region::kPadding:
              padding.emplace_back(out, n);
              return;
          }
        });
  }
};

/// Builds each write piece in the channel's staging: header blocks, payload gathered by the
/// transfer, padding. In host staging the payload also goes into the DRAM tier's reserved slabs
/// (write-through, after the header block each slab's image starts with) while it is there; in
/// device buffers (cuFile) the device builds the whole piece. Thread-safe across pieces.
class GatherSink final : public PieceSink {
 public:
  GatherSink(const IoPlan& plan, std::span<const RecordMeta> records,
             std::span<const uint64_t> first_tokens, RecordShape shape, const Key128& ns,
             DeviceTransfer& transfer, Residency residency,
             std::span<const std::optional<DramTier::Reservation>> tier)
      : plan_(plan),
        records_(records),
        first_tokens_(first_tokens),
        shape_(std::move(shape)),
        ns_(ns),
        transfer_(transfer),
        residency_(residency),
        tier_(tier) {}

  Status fill(size_t index, size_t slot, std::span<std::byte> data) override {
    WritePiece piece;
    piece.describe(plan_, records_, first_tokens_, shape_, ns_, index);
    if (residency_ == Residency::kDevice) {
      return transfer_.stage_device(slot, data.data(), piece.spans, piece.headers, piece.padding);
    }
    for (const auto& [at, bytes] : piece.headers)
      std::memcpy(data.data() + at, bytes.data(), bytes.size());
    for (const auto& [at, n] : piece.padding) std::memset(data.data() + at, 0, n);
    KVTIER_TRY(transfer_.gather(slot, data, piece.spans));
    for (const PieceSpan& span : piece.spans) {
      if (const auto& r = tier_[span.record]) {
        std::memcpy(r->data + kBlock + span.payload_offset, data.data() + span.piece_offset,
                    span.bytes);
      }
    }
    return {};
  }

  Status release(size_t slot) override { return transfer_.release(slot); }

 private:
  const IoPlan& plan_;
  std::span<const RecordMeta> records_;
  std::span<const uint64_t> first_tokens_;
  const RecordShape shape_;
  const Key128& ns_;
  DeviceTransfer& transfer_;
  Residency residency_;
  std::span<const std::optional<DramTier::Reservation>> tier_;
};

}  // namespace

Status Engine::Impl::write_records(Channel& channel, const SaveBatch& batch,
                                   DeviceTransfer& transfer, size_t slots) {
  const std::vector<ChannelFile> files = channel_files(batch.located);
  KVTIER_TRY(channel.prepare(files));
  // This write's share of the channel's staging, no more than the transfer has slots for.
  StagingPool::Lease lease = channel.staging().acquire(std::min(slots, batch.plan.pieces.size()));
  GatherSink sink(batch.plan, batch.records, batch.first_tokens, store_->record_shape(), namespace_,
                  transfer, channel.residency(), batch.tier);
  Status st = channel.write(files, batch.plan.pieces, lease, sink);
  // Only prepare() refuses files, before anything was written; an error here is an I/O error
  // (never a reason to write the same records again another way).
  if (st.code() == ErrorCode::kNotSupported) return Status(ErrorCode::kIo, st.message());
  if (st.ok() && channel.residency() == Residency::kDevice) counters_.gds_saves++;
  return st;
}

Status Engine::Impl::reserve_batch(SaveBatch& batch) {
  std::vector<RecordMeta>& records = batch.records;
  std::vector<uint64_t> sizes;
  for (const RecordMeta& m : records) sizes.push_back(m.record_bytes());
  KVTIER_ASSIGN_OR_RETURN(batch.placements, store_->reserve(sizes));
  std::vector<int> fds;
  for (size_t i = 0; i < records.size(); ++i) {
    const Placement& at = batch.placements[i];
    records[i].segment = at.file->id;
    records[i].offset = at.offset;
    records[i].sequence = at.sequence;
    fds.push_back(at.file->fd.get());
    batch.located.push_back({records[i], at.file});
  }
  batch.plan = plan_io(records, fds, kit_->staging().slot_bytes());
  batch.tier.resize(records.size());
  return {};
}

Result<uint64_t> Engine::Impl::write_images(std::span<const RecordMeta> records,
                                            std::span<const std::span<const std::byte>> images) {
  SaveBatch batch;
  std::vector<std::span<const std::byte>> payloads;
  for (size_t i = 0; i < records.size(); ++i) {
    if (store_->contains(records[i].key)) continue;  // saved or moved here meanwhile
    batch.records.push_back(records[i]);
    batch.first_tokens.push_back(0);
    payloads.push_back(images[i].subspan(kBlock, records[i].payload_bytes));
  }
  if (batch.records.empty()) return uint64_t{0};
  KVTIER_TRY(reserve_batch(batch));
  // A header of this store's own (its sequence), the payload as it verified, zero padding.
  ImagePayloads source(std::move(payloads));
  Channel& channel = kit_->posix_channel();
  const size_t slots = std::min(batch.records.size() * 2, channel.staging().slot_count());
  Status written = write_records(channel, batch, source, slots);
  if (!written.ok()) {
    store_->abort(batch.placements);
    return fail(written);
  }
  KVTIER_TRY(store_->commit(batch.records, batch.placements));
  return uint64_t{batch.records.size()};
}

}  // namespace kvtier
