// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::save: checksum, place, gather into staging, write, fdatasync, journal.
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "common/checksum.hpp"
#include "common/try.hpp"
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

/// Fills write pieces in host staging: header blocks, payload gathered from the source by the
/// device, padding.
class GatherSink final : public PieceSink {
 public:
  GatherSink(const IoPlan& plan, std::span<const RecordMeta> records,
             std::span<const uint64_t> first_tokens, const KvGeometry& g, const Key128& ns,
             DeviceTransfer& transfer, std::span<const std::optional<DramTier::Reservation>> tier)
      : plan_(plan),
        records_(records),
        first_tokens_(first_tokens),
        g_(g),
        ns_(ns),
        transfer_(transfer),
        tier_(tier) {}

  Status fill(size_t index, size_t slot, std::span<std::byte> data) override {
    piece_.describe(plan_, records_, first_tokens_, g_, ns_, index);
    for (const auto& [at, bytes] : piece_.headers)
      std::memcpy(data.data() + at, bytes.data(), bytes.size());
    for (const auto& [at, n] : piece_.padding) std::memset(data.data() + at, 0, n);
    KVTIER_TRY(transfer_.gather(slot, data, piece_.spans));
    // Write-through into the DRAM tier while the bytes are in staging.
    for (const PieceSpan& span : piece_.spans) {
      if (const auto& r = tier_[span.record]) {
        std::memcpy(r->data + span.payload_offset, data.data() + span.piece_offset, span.bytes);
      }
    }
    return {};
  }

 private:
  const IoPlan& plan_;
  std::span<const RecordMeta> records_;
  std::span<const uint64_t> first_tokens_;
  const KvGeometry& g_;
  const Key128& ns_;
  DeviceTransfer& transfer_;
  std::span<const std::optional<DramTier::Reservation>> tier_;
  WritePiece piece_;  // fill() runs on the pipeline's I/O thread only (writes have no workers)
};

}  // namespace

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

Status Engine::Impl::write_records_gds(const IoPlan& plan, std::span<const RecordMeta> records,
                                       std::span<const uint64_t> first_tokens,
                                       std::span<const Placement> placements,
                                       DeviceTransfer& transfer, size_t slots, GdsContext& gds) {
  std::unordered_map<int, const SegmentFile*> files;
  for (const Placement& p : placements) {
    KVTIER_TRY(gds.attach(p.file));
    files[p.file->fd.get()] = p.file.get();
  }
  const KvGeometry& g = options_.geometry;
  // This save's share of the engine's registered buffers, no more than the transfer has slots for.
  StagingPool::Lease lease = gds.buffers().acquire(std::min(slots, plan.pieces.size()));
  auto body = [&](size_t p, size_t slot) -> Status {
    WritePiece parts;
    parts.describe(plan, records, first_tokens, g, namespace_, p);
    const Piece& piece = plan.pieces[p];
    std::byte* buffer = lease.slots()[slot].data();
    KVTIER_TRY(transfer.stage_device(slot, buffer, parts.spans, parts.headers, parts.padding));
    return gds.write(*files.at(piece.fd), buffer, piece.offset, piece.length);
  };
  Status st = run_on_threads(
      plan.pieces.size(), lease, [&](size_t slot) { return transfer.release(slot); }, body);
  // cuFile refused the files above, before anything was written; an error here is an I/O error
  // (never a reason to write the same records again the POSIX way).
  if (st.code() == ErrorCode::kNotSupported) return Status(ErrorCode::kIo, st.message());
  return st;
}

Result<SaveResult> Engine::Impl::save(std::span<const Token> tokens, const KvTarget& source) {
  KVTIER_EXPECTS(!tokens.empty(), "save: the token list is empty");
  const LatencyTimer timer(counters_.save_latency);
  KVTIER_EXPECTS(source.params.capacity_tokens >= tokens.size(),
                 fmt::format("save source: room for {} tokens, {} given",
                             source.params.capacity_tokens, tokens.size()));
  const KvGeometry& g = options_.geometry;
  const std::vector<Key128> keys = chain_keys(namespace_, tokens, g.chunk_tokens);
  SaveResult result;
  result.tokens_stored = tokens.size();
  std::vector<RecordMeta> records;
  std::vector<uint64_t> first_tokens;
  std::vector<RecordRange> ranges;
  std::vector<std::pair<RecordMeta, uint64_t>> present;  // stored records and their first tokens
  for (size_t i = 0; i < keys.size(); ++i) {
    if (auto stored = store_->find(keys[i])) {
      ++result.chunks_present;
      present.emplace_back(stored->meta, i * uint64_t{g.chunk_tokens});
      continue;
    }
    RecordMeta m;
    m.key = keys[i];
    m.parent = i == 0 ? namespace_ : keys[i - 1];
    const uint64_t first = i * uint64_t{g.chunk_tokens};
    m.token_count =
        static_cast<uint32_t>(std::min<uint64_t>(g.chunk_tokens, tokens.size() - first));
    m.payload_bytes = g.bytes_for_tokens(m.token_count);
    records.push_back(m);
    first_tokens.push_back(first);
    ranges.push_back({first, m.token_count});
  }
  counters_.saves++;
  if (dram_ && !present.empty()) KVTIER_TRY(refresh_dram(present, source));
  if (records.empty()) return result;

  KVTIER_ASSIGN_OR_RETURN(Device * device, data_->device_for(source.kind));
  StagingPool::Lease lease = data_->staging().acquire(records.size() * 2);
  KVTIER_ASSIGN_OR_RETURN(auto transfer, device->begin(source, records.size(), lease.slots().size(),
                                                       data_->staging().slot_bytes()));
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint64_t> sums, transfer->record_sums(ranges));
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].payload_checksum = kvsum::finish(sums[i], records[i].payload_bytes);
    sizes.push_back(records[i].record_bytes());
  }
  KVTIER_ASSIGN_OR_RETURN(std::vector<Placement> placements, store_->reserve(sizes));
  std::vector<int> fds;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].segment = placements[i].file->id;
    records[i].offset = placements[i].offset;
    records[i].sequence = placements[i].sequence;
    fds.push_back(placements[i].file->fd.get());
  }
  const IoPlan plan = plan_io(records, fds, data_->staging().slot_bytes());
  std::vector<std::optional<DramTier::Reservation>> tier(records.size());
  if (dram_) {
    for (auto& r : tier) r = dram_->reserve();
  }
  // GPU memory to the file through cuFile where restores use it too; the DRAM tier's write-through
  // needs the bytes in host memory, so with a tier saves take the POSIX path.
  if (source.kind != MemoryKind::kCuda) data_->note_host_memory();
  GdsContext* gds =
      source.kind == MemoryKind::kCuda && !dram_ ? data_->gds_for(source.device) : nullptr;
  Status written;
  bool posix = gds == nullptr;
  if (gds != nullptr) {
    written = write_records_gds(plan, records, first_tokens, placements, *transfer,
                                lease.slots().size(), *gds);
    if (written.ok()) counters_.gds_saves++;
    if (written.code() ==
        ErrorCode::kNotSupported) {  // cuFile refused the files: said once, then POSIX
      data_->refuse_gds(written);
      posix = true;
    }
  }
  if (posix) {
    GatherSink sink(plan, records, first_tokens, g, namespace_, *transfer, tier);
    auto io = data_->io_engine(lease.slots().size());
    written = run_pipeline(*io, plan.pieces, lease.slots(), /*write=*/true, sink, 0, &lease);
  }
  counters_.device_copy_bytes += transfer->device_copy_bytes();
  if (written.ok())
    written = store_->commit(records, placements);
  else
    store_->abort(placements);
  for (size_t i = 0; i < records.size() && dram_; ++i) {
    if (!tier[i]) continue;
    if (written.ok()) {
      dram_->publish(*tier[i], records[i].key, records[i].payload_bytes,
                     records[i].payload_checksum);
    } else {
      dram_->abandon(*tier[i]);
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
