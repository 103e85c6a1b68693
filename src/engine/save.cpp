// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::save: checksum, place, the write route (write_route.cpp) to the drives with the DRAM
// tier written through, fdatasync, journal; then the tiers behind (write-behind to the cluster).
#include <optional>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/checksum.hpp"
#include "engine/record_codec.hpp"
#include "engine/write_route.hpp"

namespace kvtier {

void Engine::Impl::publish_image(const DramTier::Reservation& slab, const RecordMeta& m) {
  // The payload is in place after the header block; the header makes the slab a record image,
  // checked like any other where it is read.
  encode_header(m, store_->record_shape(), namespace_, std::span(slab.data, kBlock));
  dram_->publish(slab, m.key, kBlock + m.payload_bytes, m.payload_checksum);
}

// A session saved again is hot: its stored chunks the DRAM tier lacks are copied in from the
// caller's KV (it is the same KV: the tier publishes them under the stored checksum, and every
// DRAM hit is verified where it lands, so a source that differs is a miss, never wrong KV).
Status Engine::Impl::refresh_dram(std::span<const std::pair<RecordMeta, uint64_t>> present,
                                  const KvMemory& source) {
  std::vector<size_t> missing;
  for (size_t i = 0; i < present.size(); ++i) {
    const RecordMeta& m = present[i].first;
    // A coded record's image holds its stored bytes, which the caller's KV is not: it comes into
    // the tier when a restore reads it.
    if (is_coded(m, store_->record_shape())) continue;
    if (!dram_->find(m.key, m.payload_checksum) && kBlock + m.payload_bytes <= dram_->slab_bytes())
      missing.push_back(i);
  }
  if (missing.empty()) return {};
  KVTIER_ASSIGN_OR_RETURN(Device * device, kit_->device_for(source.kind));
  const uint64_t piece = kit_->staging().slot_bytes();
  KVTIER_ASSIGN_OR_RETURN(auto transfer, device->begin(source, present.size(), 1, piece));
  for (size_t i : missing) {
    const auto& [m, first] = present[i];
    std::optional<DramTier::Reservation> slab = dram_->reserve();
    if (!slab) break;  // every slab is pinned by restores in flight
    Status copied;
    for (uint64_t at = 0; at < m.payload_bytes && copied.ok(); at += piece) {
      const uint64_t n = std::min(piece, m.payload_bytes - at);
      const PieceSpan span{0, at, n, first, m.token_count, static_cast<uint32_t>(i)};
      copied = transfer->gather(0, std::span(slab->data + kBlock + at, n), std::span(&span, 1));
    }
    if (!copied.ok()) {
      dram_->abandon(*slab);
      return copied.with_context("copying a saved chunk into the DRAM tier");
    }
    publish_image(*slab, m);
  }
  counters_.device_copy_bytes += transfer->device_copy_bytes();
  return {};
}

std::vector<ChunkRef> chain_refs(const Key128& ns, std::span<const Key128> keys, uint32_t chunk,
                                 size_t first, uint64_t end) {
  std::vector<ChunkRef> refs;
  const size_t chunks = (end + chunk - 1) / chunk;
  for (size_t i = first; i < chunks; ++i) {
    const uint64_t at = i * uint64_t{chunk};
    refs.push_back({keys[i], i == 0 ? ns : keys[i - 1],
                    static_cast<uint32_t>(std::min<uint64_t>(chunk, end - at)), at});
  }
  return refs;
}

std::vector<ChunkRef> Engine::Impl::chunk_refs(std::span<const Token> tokens,
                                               size_t first_chunk) const {
  const uint32_t chunk = options_.geometry.chunk_tokens;
  return chain_refs(namespace_, chain_keys(namespace_, tokens, chunk), chunk, first_chunk,
                    tokens.size());
}

void Engine::Impl::split_save(std::span<const ChunkRef> chunks, SaveBatch& batch,
                              std::vector<std::pair<RecordMeta, uint64_t>>& present,
                              SaveResult& result) {
  for (const ChunkRef& c : chunks) {
    if (auto stored = store_->find(c.key)) {
      ++result.chunks_present;
      present.emplace_back(stored->meta, c.first);
      continue;
    }
    RecordMeta m;
    m.key = c.key;
    m.parent = c.parent;
    m.token_count = c.tokens;
    m.payload_bytes = options_.geometry.bytes_for_tokens(m.token_count);
    batch.records.push_back(m);
    batch.first_tokens.push_back(c.first);
  }
}

Status Engine::Impl::place_batch(SaveBatch& batch, DeviceTransfer& transfer) {
  std::vector<RecordMeta>& records = batch.records;
  std::vector<RecordRange> ranges;
  for (size_t i = 0; i < records.size(); ++i)
    ranges.push_back({batch.first_tokens[i], records[i].token_count});
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint64_t> sums, transfer.record_sums(ranges));
  for (size_t i = 0; i < records.size(); ++i)
    records[i].payload_checksum = kvsum::finish(sums[i], records[i].payload_bytes);
  KVTIER_TRY(reserve_batch(batch));
  if (dram_) {
    for (auto& r : batch.tier) r = dram_->reserve();
  }
  return {};
}

Status Engine::Impl::finish_batch(SaveBatch& batch, Status written) {
  const std::vector<RecordMeta>& records = batch.records;
  if (written.ok())
    written = store_->commit(records, batch.placements);
  else
    store_->abort(batch.placements);
  for (size_t i = 0; i < records.size() && dram_; ++i) {
    if (!batch.tier[i]) continue;
    if (written.ok()) {
      publish_image(*batch.tier[i], records[i]);
    } else {
      dram_->abandon(*batch.tier[i]);
    }
  }
  if (!written.ok()) return written.with_context(fmt::format("save to {}", store_->dir()));
  for (const auto& tier : tiers_) tier->saved(records);
  return {};
}

Status Engine::Impl::save_coded(SaveBatch& batch, Device& device, const KvMemory& source) {
  std::vector<RecordMeta>& records = batch.records;
  // Records are coded and written a staging's worth of raw bytes at a time, so the host memory a
  // save holds for coding stays bounded whatever the session's length. Admitted first as a whole,
  // at the raw sizes its parts take at most: one that cannot fit is refused before any part
  // evicts a stored session (or the save's own first parts).
  std::vector<uint64_t> sizes;
  for (const RecordMeta& m : records) sizes.push_back(m.record_bytes());
  KVTIER_TRY(store_->admit(sizes));
  const uint64_t piece = kit_->staging().slot_bytes();
  KVTIER_ASSIGN_OR_RETURN(auto transfer, device.begin(source, records.size(), 1, piece));
  std::vector<RecordRange> ranges;
  for (size_t i = 0; i < records.size(); ++i)
    ranges.push_back({batch.first_tokens[i], records[i].token_count});
  // The checksum is over the raw payload, summed where the KV is, as for a raw record.
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint64_t> sums, transfer->record_sums(ranges));
  for (size_t i = 0; i < records.size(); ++i)
    records[i].payload_checksum = kvsum::finish(sums[i], records[i].payload_bytes);
  Channel& channel = kit_->posix_channel();
  Status status;
  for (size_t first = 0; first < records.size() && status.ok();) {
    const size_t end = staging_run_end(first, records.size(), kit_->staging().bytes(),
                                       [&](size_t i) { return records[i].payload_bytes; });
    SaveBatch part;
    part.records.assign(records.begin() + first, records.begin() + end);
    part.first_tokens.assign(batch.first_tokens.begin() + first, batch.first_tokens.begin() + end);
    std::vector<std::vector<std::byte>> raw(end - first);
    for (size_t i = 0; i < raw.size() && status.ok(); ++i) {
      const RecordMeta& m = part.records[i];
      raw[i].resize(m.payload_bytes);
      for (uint64_t at = 0; at < m.payload_bytes && status.ok(); at += piece) {
        const uint64_t n = std::min(piece, m.payload_bytes - at);
        const PieceSpan span{
            0, at, n, part.first_tokens[i], m.token_count, static_cast<uint32_t>(first + i)};
        status = transfer->gather(0, std::span(raw[i].data() + at, n), std::span(&span, 1));
      }
    }
    if (!status.ok()) break;
    std::vector<std::optional<std::vector<std::byte>>> coded(raw.size());
    KVTIER_TRY(code_payloads(raw, coded));
    std::vector<std::span<const std::byte>> payloads;
    for (size_t i = 0; i < raw.size(); ++i) {
      const std::vector<std::byte>& kept = coded[i] ? *coded[i] : raw[i];
      part.records[i].payload_bytes = kept.size();
      payloads.emplace_back(kept);
    }
    KVTIER_TRY(reserve_batch(part));
    if (dram_) {
      for (auto& r : part.tier) r = dram_->reserve();
    }
    ImagePayloads stored(std::move(payloads));
    const size_t slots = std::min(part.records.size() * 2, channel.staging().slot_count());
    status = finish_batch(part, write_records(channel, part, stored, slots));
    if (status.ok()) std::copy(part.records.begin(), part.records.end(), records.begin() + first);
    first = end;
  }
  counters_.device_copy_bytes += transfer->device_copy_bytes();
  return status;
}

Result<SaveResult> Engine::Impl::save(std::span<const Token> tokens, const KvMemory& source) {
  KVTIER_EXPECTS(!tokens.empty(), "save: the token list is empty");
  return save_chunks(chunk_refs(tokens), source);
}

Result<SaveResult> Engine::Impl::save_chunks(std::span<const ChunkRef> chunks,
                                             const KvMemory& source) {
  const LatencyTimer timer(counters_.save_latency);
  const uint64_t end = chunks.empty() ? 0 : chunks.back().first + chunks.back().tokens;
  KVTIER_EXPECTS(
      source.params.capacity_tokens >= end,
      fmt::format("save source: room for {} tokens, {} given", source.params.capacity_tokens, end));
  SaveResult result;
  result.tokens_stored = end;
  SaveBatch batch;
  std::vector<std::pair<RecordMeta, uint64_t>> present;  // stored records and their first tokens
  split_save(chunks, batch, present, result);
  counters_.saves++;
  if (dram_ && !present.empty()) KVTIER_TRY(refresh_dram(present, source));
  const std::vector<RecordMeta>& records = batch.records;
  if (records.empty()) return result;

  KVTIER_ASSIGN_OR_RETURN(Device * device, kit_->device_for(source.kind));
  // Options resolve compression for TP-free stores of 16-bit KV only (state parts and a format-1
  // store beside are opened with it off).
  if (options_.compression != Compression::kOff) {
    KVTIER_TRY(save_coded(batch, *device, source));
  } else {
    // GPU memory to the file through cuFile where restores use it too; the DRAM tier's
    // write-through needs the bytes in host memory, so with a tier saves take the POSIX path.
    Channel& channel = kit_->file_channel_for(&source, /*through_host=*/dram_ != nullptr);
    const size_t slots = std::min(records.size() * 2, channel.staging().slot_count());
    KVTIER_ASSIGN_OR_RETURN(
        auto transfer, device->begin(source, records.size(), slots, kit_->staging().slot_bytes()));
    KVTIER_TRY(place_batch(batch, *transfer));
    Status written = write_records(channel, batch, *transfer, slots);
    if (written.code() == ErrorCode::kNotSupported && &channel != &kit_->posix_channel()) {
      kit_->refuse_gds(written);  // cuFile refused the files: said once, then POSIX
      written = write_records(kit_->posix_channel(), batch, *transfer, slots);
    }
    counters_.device_copy_bytes += transfer->device_copy_bytes();
    KVTIER_TRY(finish_batch(batch, written));
  }
  result.chunks_written = records.size();
  const RecordShape& shape = store_->record_shape();
  for (const RecordMeta& m : records) {
    result.bytes_written += m.payload_bytes;
    counters_.kv_bytes_written += raw_payload_bytes(shape, m.token_count);
    if (is_coded(m, shape)) ++counters_.coded_records_written;
  }
  counters_.chunks_written += result.chunks_written;
  counters_.bytes_written += result.bytes_written;
  return result;
}

}  // namespace kvtier
