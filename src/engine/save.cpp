// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::save: checksum, place, gather into staging, write, fdatasync, journal.
#include <cstring>

#include <fmt/format.h>

#include "common/try.hpp"
#include "engine/engine_impl.hpp"
#include "engine/record_io.hpp"
#include "store/checksum.hpp"

namespace kvtier {
namespace {

/// Fills write pieces: header blocks, payload gathered from the source tensor, zero padding.
class GatherSink final : public PieceSink {
 public:
  GatherSink(const IoPlan& plan, std::span<const RecordMeta> records,
             std::span<const uint64_t> first_tokens, const ChunkedKv& source, const KvGeometry& g,
             const Key128& ns, Device& device)
      : plan_(plan), records_(records), first_tokens_(first_tokens), source_(source), g_(g),
        ns_(ns), device_(device) {}

  Status fill(size_t index, std::span<std::byte> data) override {
    Status status;
    for_each_region(plan_, records_, index, [&](size_t r, Region region, uint64_t at, uint64_t out, uint64_t n) {
      switch (region) {
        case Region::kHeader: {
          alignas(8) std::byte block[kBlock];
          encode_header(records_[r], g_, ns_, block);
          std::memcpy(data.data() + out, block + at, n);
          return;
        }
        case Region::kPayload:
          for_each_payload_span(g_, records_[r].token_count, first_tokens_[r], source_.capacity_tokens, at, n,
                                [&](uint64_t kv, uint64_t q, uint64_t len) {
                                  auto copied = device_.copy_out(data.subspan(out + (q - at), len),
                                                                 source_.memory, kv, q / 8);
                                  if (!copied && status.ok()) status = copied.error();
                                });
          return;
        case Region::kPadding:
          std::memset(data.data() + out, 0, n);
          return;
      }
    });
    return status;
  }

 private:
  const IoPlan& plan_;
  std::span<const RecordMeta> records_;
  std::span<const uint64_t> first_tokens_;
  const ChunkedKv& source_;
  const KvGeometry& g_;
  const Key128& ns_;
  Device& device_;
};

}  // namespace

Result<SaveResult> Engine::Impl::save(std::span<const Token> tokens, const ChunkedKv& source) {
  KVTIER_EXPECTS(!tokens.empty(), "save: the token list is empty");
  KVTIER_TRY(check_kv(source, tokens.size(), "save source"));
  const KvGeometry& g = options_.geometry;
  const std::vector<Key128> keys = chain_keys(namespace_, tokens, g.chunk_tokens);
  SaveResult result;
  result.tokens_stored = tokens.size();
  std::vector<RecordMeta> records;
  std::vector<uint64_t> first_tokens;
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (store_->contains(keys[i])) {
      ++result.chunks_present;
      continue;
    }
    RecordMeta m;
    m.key = keys[i];
    m.parent = i == 0 ? namespace_ : keys[i - 1];
    const uint64_t first = i * uint64_t{g.chunk_tokens};
    m.token_count = static_cast<uint32_t>(std::min<uint64_t>(g.chunk_tokens, tokens.size() - first));
    m.payload_bytes = g.bytes_for_tokens(m.token_count);
    uint64_t sum = 0;
    const uint64_t block = m.token_count * g.row_bytes();
    for (uint64_t b = 0; b < 2 * uint64_t{g.layers}; ++b) {
      KVTIER_ASSIGN_OR_RETURN(uint64_t part,
                              device_->sum(source.memory, (b * source.capacity_tokens + first) * g.row_bytes(),
                                           block, b * block / 8));
      sum += part;
    }
    m.payload_checksum = kvsum::finish(sum, m.payload_bytes);
    records.push_back(m);
    first_tokens.push_back(first);
    sizes.push_back(m.record_bytes());
  }
  counters_.saves++;
  if (records.empty()) return result;

  KVTIER_ASSIGN_OR_RETURN(std::vector<Placement> placements, store_->reserve(sizes));
  std::vector<int> fds;
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].segment = placements[i].file->id;
    records[i].offset = placements[i].offset;
    records[i].sequence = placements[i].sequence;
    fds.push_back(placements[i].file->fd.get());
  }
  const IoPlan plan = plan_io(records, fds, staging_->slot_bytes());
  GatherSink sink(plan, records, first_tokens, source, g, namespace_, *device_);
  Status written;
  {
    StagingPool::Lease lease = staging_->acquire(plan.pieces.size());
    auto io = io_engine(lease.slots().size());
    written = run_pipeline(*io, plan.pieces, lease.slots(), /*write=*/true, sink);
  }
  if (!written.ok()) {
    store_->abort(placements);
    return fail(written.with_context(fmt::format("save to {}", store_->dir())));
  }
  KVTIER_TRY(store_->commit(records, placements));
  result.chunks_written = records.size();
  for (const RecordMeta& m : records) result.bytes_written += m.payload_bytes;
  counters_.chunks_written += result.chunks_written;
  counters_.bytes_written += result.bytes_written;
  return result;
}

}  // namespace kvtier
