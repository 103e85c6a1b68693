// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The host-memory byte source: payloads the engine already holds (the DRAM tier's slabs, records
// fetched from the remote tier, a record re-read and verified on the host) go through the same read
// route as bytes from a drive: one copy each to the device, verified where it lands.
#include <algorithm>

#include "api/try.hpp"
#include "datapath/byte_source.hpp"

namespace kvtier {
namespace {

class MemorySource final : public ByteSource {
 public:
  MemorySource(StagingPool& staging, std::vector<std::span<const std::byte>> payloads)
      : staging_(staging), payloads_(std::move(payloads)) {}

  std::string_view name() const override { return "host memory"; }
  StagingPool& staging() override { return staging_; }
  Landing landing() const override { return Landing::kHostMemory; }

  Status read(std::span<const LocatedRecord> records, std::span<const Piece> /*pieces*/,
              StagingPool::Lease& lease, RecordSink& sink, unsigned /*workers*/) override {
    KVTIER_EXPECTS(records.size() == payloads_.size(),
                   "a memory source reads the records it holds payloads for");
    const uint64_t piece = staging_.slot_bytes();
    const size_t slots = lease.slots().size();
    size_t next = 0;
    for (size_t r = 0; r < payloads_.size(); ++r) {
      const std::span<const std::byte> payload = payloads_[r];
      for (uint64_t at = 0; at < payload.size(); at += piece) {
        const size_t slot = next++ % slots;
        KVTIER_TRY(sink.release(slot));
        const uint64_t n = std::min<uint64_t>(piece, payload.size() - at);
        KVTIER_TRY(sink.consume_payload(r, slot, at, payload.subspan(at, n)));
      }
    }
    return {};
  }

  Status write(std::span<const LocatedRecord> /*records*/, std::span<const Piece> /*pieces*/,
               StagingPool::Lease& /*lease*/, RecordSink& /*sink*/) override {
    return {ErrorCode::kNotSupported, "payloads in host memory are not a store to write to"};
  }

  // The copy to the device is the only traffic, and the device transfer accounts for it.
  uint64_t host_bytes(uint64_t /*bytes*/) const override { return 0; }

 private:
  StagingPool& staging_;
  std::vector<std::span<const std::byte>> payloads_;
};

}  // namespace

std::unique_ptr<ByteSource> make_memory_source(StagingPool& staging,
                                               std::vector<std::span<const std::byte>> payloads) {
  return std::make_unique<MemorySource>(staging, std::move(payloads));
}

}  // namespace kvtier
