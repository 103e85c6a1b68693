// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::save and the one write route: checksum, place, build each piece in the target's staging
// (host slots or device buffers), write, fdatasync, journal.
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/checksum.hpp"
#include "engine/engine_impl.hpp"
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
                std::span<const uint64_t> first_tokens, const KvGeometry& g, const Key128& ns,
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
              encode_header(records[r], g, ns, block);
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

/// Builds each write piece in the target's staging: header blocks, payload gathered from the
/// source by the device, padding. In host staging the payload also goes into the DRAM tier's
/// reserved slabs (write-through) while it is there; in device memory (cuFile) the device builds
/// the whole piece. Thread-safe across pieces.
class GatherSink final : public RecordSink {
 public:
  GatherSink(const IoPlan& plan, std::span<const RecordMeta> records,
             std::span<const uint64_t> first_tokens, const KvGeometry& g, const Key128& ns,
             DeviceTransfer& transfer, Landing landing,
             std::span<const std::optional<DramTier::Reservation>> tier)
      : plan_(plan),
        records_(records),
        first_tokens_(first_tokens),
        g_(g),
        ns_(ns),
        transfer_(transfer),
        landing_(landing),
        tier_(tier) {}

  Status fill(size_t index, size_t slot, std::span<std::byte> data) override {
    WritePiece piece;
    piece.describe(plan_, records_, first_tokens_, g_, ns_, index);
    if (landing_ == Landing::kDevice) {
      return transfer_.stage_device(slot, data.data(), piece.spans, piece.headers, piece.padding);
    }
    for (const auto& [at, bytes] : piece.headers)
      std::memcpy(data.data() + at, bytes.data(), bytes.size());
    for (const auto& [at, n] : piece.padding) std::memset(data.data() + at, 0, n);
    KVTIER_TRY(transfer_.gather(slot, data, piece.spans));
    for (const PieceSpan& span : piece.spans) {
      if (const auto& r = tier_[span.record]) {
        std::memcpy(r->data + span.payload_offset, data.data() + span.piece_offset, span.bytes);
      }
    }
    return {};
  }

  Status release(size_t slot) override { return transfer_.release(slot); }

 private:
  const IoPlan& plan_;
  std::span<const RecordMeta> records_;
  std::span<const uint64_t> first_tokens_;
  const KvGeometry& g_;
  const Key128& ns_;
  DeviceTransfer& transfer_;
  Landing landing_;
  std::span<const std::optional<DramTier::Reservation>> tier_;
};

}  // namespace

struct Engine::Impl::SaveBatch {
  std::vector<RecordMeta> records;  // placed by place_batch()
  std::vector<uint64_t> first_tokens;
  std::vector<Placement> placements;
  std::vector<LocatedRecord> located;  // records with their files
  IoPlan plan;
  std::vector<std::optional<DramTier::Reservation>> tier;  // write-through slabs, per record
};

// A session saved again is hot: its stored chunks the DRAM tier lacks are copied in from the
// caller's KV (it is the same KV: the tier publishes them under the stored checksum, and every
// DRAM hit is verified where it lands, so a source that differs is a miss, never wrong KV).
Status Engine::Impl::refresh_dram(std::span<const std::pair<RecordMeta, uint64_t>> present,
                                  const KvTarget& source) {
  std::vector<size_t> missing;
  for (size_t i = 0; i < present.size(); ++i) {
    const RecordMeta& m = present[i].first;
    if (!dram_->find(m.key, m.payload_checksum) && m.payload_bytes <= dram_->slab_bytes())
      missing.push_back(i);
  }
  if (missing.empty()) return {};
  KVTIER_ASSIGN_OR_RETURN(Device * device, data_->device_for(source.kind));
  const uint64_t piece = data_->staging().slot_bytes();
  KVTIER_ASSIGN_OR_RETURN(auto transfer, device->begin(source, present.size(), 1, piece));
  for (size_t i : missing) {
    const auto& [m, first] = present[i];
    std::optional<DramTier::Reservation> slab = dram_->reserve();
    if (!slab) break;  // every slab is pinned by restores in flight
    Status copied;
    for (uint64_t at = 0; at < m.payload_bytes && copied.ok(); at += piece) {
      const uint64_t n = std::min(piece, m.payload_bytes - at);
      const PieceSpan span{0, at, n, first, m.token_count, static_cast<uint32_t>(i)};
      copied = transfer->gather(0, std::span(slab->data + at, n), std::span(&span, 1));
    }
    if (!copied.ok()) {
      dram_->abandon(*slab);
      return copied.with_context("copying a saved chunk into the DRAM tier");
    }
    dram_->publish(*slab, m.key, m.payload_bytes, m.payload_checksum);
  }
  counters_.device_copy_bytes += transfer->device_copy_bytes();
  return {};
}

Status Engine::Impl::write_records(ByteSource& target, const SaveBatch& batch,
                                   DeviceTransfer& transfer, size_t slots) {
  KVTIER_TRY(target.prepare(batch.located));
  // This save's share of the target's staging, no more than the transfer has slots for.
  StagingPool::Lease lease = target.staging().acquire(std::min(slots, batch.plan.pieces.size()));
  GatherSink sink(batch.plan, batch.records, batch.first_tokens, options_.geometry, namespace_,
                  transfer, target.landing(), batch.tier);
  Status st = target.write(batch.located, batch.plan.pieces, lease, sink);
  // Only prepare() refuses files, before anything was written; an error here is an I/O error
  // (never a reason to write the same records again another way).
  if (st.code() == ErrorCode::kNotSupported) return Status(ErrorCode::kIo, st.message());
  if (st.ok() && target.landing() == Landing::kDevice) counters_.gds_saves++;
  return st;
}

void Engine::Impl::split_save(std::span<const Token> tokens, SaveBatch& batch,
                              std::vector<std::pair<RecordMeta, uint64_t>>& present,
                              SaveResult& result) {
  const KvGeometry& g = options_.geometry;
  const std::vector<Key128> keys = chain_keys(namespace_, tokens, g.chunk_tokens);
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t first = i * uint64_t{g.chunk_tokens};
    if (auto stored = store_->find(keys[i])) {
      ++result.chunks_present;
      present.emplace_back(stored->meta, first);
      continue;
    }
    RecordMeta m;
    m.key = keys[i];
    m.parent = i == 0 ? namespace_ : keys[i - 1];
    m.token_count =
        static_cast<uint32_t>(std::min<uint64_t>(g.chunk_tokens, tokens.size() - first));
    m.payload_bytes = g.bytes_for_tokens(m.token_count);
    batch.records.push_back(m);
    batch.first_tokens.push_back(first);
  }
}

Status Engine::Impl::place_batch(SaveBatch& batch, DeviceTransfer& transfer) {
  std::vector<RecordMeta>& records = batch.records;
  std::vector<RecordRange> ranges;
  for (size_t i = 0; i < records.size(); ++i)
    ranges.push_back({batch.first_tokens[i], records[i].token_count});
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint64_t> sums, transfer.record_sums(ranges));
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].payload_checksum = kvsum::finish(sums[i], records[i].payload_bytes);
    sizes.push_back(records[i].record_bytes());
  }
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
  batch.plan = plan_io(records, fds, data_->staging().slot_bytes());
  batch.tier.resize(records.size());
  if (dram_) {
    for (auto& r : batch.tier) r = dram_->reserve();
  }
  return {};
}

Result<SaveResult> Engine::Impl::save(std::span<const Token> tokens, const KvTarget& source) {
  KVTIER_EXPECTS(!tokens.empty(), "save: the token list is empty");
  const LatencyTimer timer(counters_.save_latency);
  KVTIER_EXPECTS(source.params.capacity_tokens >= tokens.size(),
                 fmt::format("save source: room for {} tokens, {} given",
                             source.params.capacity_tokens, tokens.size()));
  SaveResult result;
  result.tokens_stored = tokens.size();
  SaveBatch batch;
  std::vector<std::pair<RecordMeta, uint64_t>> present;  // stored records and their first tokens
  split_save(tokens, batch, present, result);
  counters_.saves++;
  if (dram_ && !present.empty()) KVTIER_TRY(refresh_dram(present, source));
  const std::vector<RecordMeta>& records = batch.records;
  if (records.empty()) return result;

  KVTIER_ASSIGN_OR_RETURN(Device * device, data_->device_for(source.kind));
  // GPU memory to the file through cuFile where restores use it too; the DRAM tier's write-through
  // needs the bytes in host memory, so with a tier saves take the POSIX path.
  ByteSource& target = data_->source_for(&source, /*through_host=*/dram_ != nullptr);
  const size_t slots = std::min(records.size() * 2, target.staging().slot_count());
  KVTIER_ASSIGN_OR_RETURN(
      auto transfer, device->begin(source, records.size(), slots, data_->staging().slot_bytes()));
  KVTIER_TRY(place_batch(batch, *transfer));
  Status written = write_records(target, batch, *transfer, slots);
  if (written.code() == ErrorCode::kNotSupported && &target != &data_->posix_source()) {
    data_->refuse_gds(written);  // cuFile refused the files: said once, then POSIX
    written = write_records(data_->posix_source(), batch, *transfer, slots);
  }
  counters_.device_copy_bytes += transfer->device_copy_bytes();
  if (written.ok())
    written = store_->commit(records, batch.placements);
  else
    store_->abort(batch.placements);
  for (size_t i = 0; i < records.size() && dram_; ++i) {
    if (!batch.tier[i]) continue;
    if (written.ok()) {
      dram_->publish(*batch.tier[i], records[i].key, records[i].payload_bytes,
                     records[i].payload_checksum);
    } else {
      dram_->abandon(*batch.tier[i]);
    }
  }
  if (!written.ok()) return fail(written.with_context(fmt::format("save to {}", store_->dir())));
  if (remote_) write_behind(records);
  result.chunks_written = records.size();
  for (const RecordMeta& m : records) result.bytes_written += m.payload_bytes;
  counters_.chunks_written += result.chunks_written;
  counters_.bytes_written += result.bytes_written;
  return result;
}

}  // namespace kvtier
