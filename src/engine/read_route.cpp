// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one read route every byte source goes through: plan the records into pieces, lease staging,
// begin a device transfer, let the source read, check headers and checksums as pieces arrive,
// scatter payloads into the destination (verified where they land), account.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "api/try.hpp"
#include "engine/read_route.hpp"
#include "engine/record_io.hpp"

namespace kvtier {
namespace {

using ReadOutcome = Engine::Impl::ReadOutcome;

/// The records of a read in token order, their first tokens, and (for a source that reads store
/// files) their files planned into pieces.
struct ReadPlan {
  std::vector<RecordMeta> records;
  std::vector<uint64_t> first_tokens;
  IoPlan io;
  size_t pieces = 0;  // what the source hands the sink: file pieces, or slot-sized payload spans

  /// `firsts` gives each record's first token; empty means record i starts at i * chunk_tokens.
  ReadPlan(std::span<const LocatedRecord> located, bool files, uint32_t chunk_tokens,
           uint64_t piece_bytes, std::span<const uint64_t> firsts = {}) {
    std::vector<int> fds;
    for (size_t i = 0; i < located.size(); ++i) {
      records.push_back(located[i].meta);
      first_tokens.push_back(firsts.empty() ? i * uint64_t{chunk_tokens} : firsts[i]);
      if (files) fds.push_back(located[i].file->fd.get());
    }
    if (files) {
      io = plan_io(records, fds, piece_bytes);
      pieces = io.pieces.size();
      return;
    }
    for (const RecordMeta& m : records) {
      io.bytes += m.payload_bytes;
      pieces += (m.payload_bytes + piece_bytes - 1) / piece_bytes;
    }
  }

  /// An outcome sized for these records.
  void start(ReadOutcome& out) const {
    out.sums = std::vector<std::atomic<uint64_t>>(records.size());
    out.received = std::vector<std::atomic<uint64_t>>(records.size());
    out.header.assign(records.size(), HeaderState::kUnseen);
    out.bytes = io.bytes;
    out.extents = io.extents;
  }
};

// Checksumming and scattering a piece costs more CPU than reading it: spread it over the cores
// (the I/O thread mostly sleeps in the kernel).
unsigned consumer_threads() { return std::clamp(std::thread::hardware_concurrency(), 1u, 4u); }

/// What piece `p` of `read` holds: checks its record headers, whose bytes `header_at(offset,
/// bytes)` supplies (a view of host staging, or a copy back from device staging), counts the
/// payload bytes received and lists them in `spans`. Stops at the first error `header_at` returns.
template <typename HeaderAt>
Status classify_piece(const ReadPlan& read, size_t p, const KvGeometry& g, ReadOutcome& out,
                      HeaderAt&& header_at, std::vector<PieceSpan>& spans) {
  Status st;
  spans.clear();
  for_each_region(
      read.io, read.records, p, [&](size_t r, Region region, uint64_t at, uint64_t in, uint64_t n) {
        if (!st.ok()) return;
        if (region == Region::kHeader) {
          Result<std::span<const std::byte>> block = header_at(in, n);
          if (!block) {  // not seen: an error to report, not evidence against the record
            st = block.error();
            return;
          }
          const bool good = at == 0 && n == kBlock && header_matches(*block, read.records[r], g);
          out.header[r] = good ? HeaderState::kGood : HeaderState::kBad;
        } else if (region == Region::kPayload) {
          out.received[r] += n;
          spans.push_back({in, at, n, read.first_tokens[r], read.records[r].token_count,
                           static_cast<uint32_t>(r)});
        }
      });
  return st;
}

/// Checks headers and sums payloads; with a destination, the device scatters payloads into it and
/// sums them there (where the data lands), else they are summed here from staging. Pieces in host
/// staging are checked in place; pieces a source read into device memory have their headers
/// copied back to be checked here; payloads a source held in memory come with no header.
class ScatterSink final : public RecordSink {
 public:
  ScatterSink(const ReadPlan& read, DeviceTransfer* transfer, Landing landing, const KvGeometry& g,
              ReadOutcome& out, const ProgressFn& progress)
      : read_(read),
        transfer_(transfer),
        landing_(landing),
        g_(g),
        out_(out),
        progress_(progress) {}

  Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
    std::vector<PieceSpan> spans;
    alignas(8) std::byte header[kBlock];
    auto header_at = [&](uint64_t in, uint64_t n) -> Result<std::span<const std::byte>> {
      if (landing_ != Landing::kDevice) return data.subspan(in, n);
      KVTIER_TRY(transfer_->read_device(slot, data.data() + in, std::span(header, n)));
      return std::span<const std::byte>(header, n);
    };
    KVTIER_TRY(classify_piece(read_, index, g_, out_, header_at, spans));
    Status st;
    if (transfer_ == nullptr) {
      for (const PieceSpan& sp : spans) {
        out_.sums[sp.record] +=
            kvsum::partial(data.data() + sp.piece_offset, sp.bytes, sp.payload_offset / 8);
      }
    } else if (!spans.empty()) {
      st = landing_ == Landing::kDevice ? transfer_->scatter_device(slot, data.data(), spans)
                                        : transfer_->scatter(slot, data, spans);
    }
    advance(data.size());
    return st;
  }

  Status consume_payload(size_t record, size_t slot, uint64_t at,
                         std::span<const std::byte> data) override {
    // The source's owner checked the header (or the DRAM tier's key and checksum stand for it).
    out_.header[record] = HeaderState::kGood;
    out_.received[record] += data.size();
    const PieceSpan span{0,
                         at,
                         data.size(),
                         read_.first_tokens[record],
                         read_.records[record].token_count,
                         static_cast<uint32_t>(record)};
    Status st = transfer_->scatter(slot, data, std::span(&span, 1));
    advance(data.size());
    return st;
  }

  Status release(size_t slot) override {
    return transfer_ == nullptr ? Status() : transfer_->release(slot);
  }

 private:
  void advance(uint64_t bytes) {
    const uint64_t done = done_ += bytes;
    if (progress_) {
      std::lock_guard lock(progress_mu_);
      progress_(done, read_.io.bytes);
    }
  }

  const ReadPlan& read_;
  DeviceTransfer* transfer_;
  Landing landing_;
  const KvGeometry& g_;
  ReadOutcome& out_;
  const ProgressFn& progress_;
  std::mutex progress_mu_;
  std::atomic<uint64_t> done_{0};
};

}  // namespace

Result<ReadOutcome> Engine::Impl::read_records(ByteSource& source,
                                               std::span<const LocatedRecord> located,
                                               const KvTarget* destination,
                                               const ProgressFn& progress,
                                               std::span<const uint64_t> first_tokens) {
  const Landing landing = source.landing();
  KVTIER_EXPECTS(destination != nullptr || landing == Landing::kHostStaging,
                 fmt::format("a {} source needs a destination", source.name()));
  KVTIER_TRY(source.prepare(located));
  StagingPool& staging = source.staging();
  const ReadPlan read(located, landing != Landing::kHostMemory, options_.geometry.chunk_tokens,
                      staging.slot_bytes(), first_tokens);
  ReadOutcome out;
  read.start(out);
  // This read's share of the source's staging, handed back down to an equal share while other
  // operations wait.
  StagingPool::Lease lease = staging.acquire(read.pieces);
  std::unique_ptr<DeviceTransfer> transfer;
  if (destination != nullptr) {
    auto device = data_->device_for(destination->kind);
    auto begun = device ? (*device)->begin(*destination, read.records.size(), lease.slots().size(),
                                           staging.slot_bytes())
                        : fail(device.error());
    if (!begun) {
      out.status = begun.error();
      return out;
    }
    transfer = std::move(*begun);
  }
  ScatterSink sink(read, transfer.get(), landing, options_.geometry, out, progress);
  out.status = source.read(located, read.io.pieces, lease, sink, consumer_threads());
  switch (landing) {
    case Landing::kHostStaging:
      counters_.staging_bytes_read += read.io.bytes;
      break;
    case Landing::kDevice:
      counters_.gds_restores++;
      break;
    case Landing::kHostMemory:  // no read: the caller counts what the tier it holds served
      break;
  }
  out.host_bytes = source.host_bytes(read.io.bytes);
  if (transfer) {
    out.absorb(*transfer);
    counters_.device_copy_bytes += transfer->device_copy_bytes();
    out.host_bytes += transfer->host_memory_bytes();
  }
  return out;
}

Result<ReadOutcome> Engine::Impl::read_payloads(std::span<const LocatedRecord> records,
                                                std::vector<std::span<const std::byte>> payloads,
                                                std::span<const uint64_t> first_tokens,
                                                const KvTarget& destination) {
  const std::unique_ptr<ByteSource> source =
      make_memory_source(data_->staging(), std::move(payloads));
  return read_records(*source, records, &destination, {}, first_tokens);
}

ReadOutcome Engine::Impl::read_from_disk(std::span<const LocatedRecord> records,
                                         const KvTarget& destination,
                                         std::span<const uint64_t> first_tokens) {
  ByteSource& source = data_->source_for(&destination);
  auto read = read_records(source, records, &destination, {}, first_tokens);
  if (read) return std::move(*read);
  if (&source != &data_->posix_source()) {
    // cuFile refused the store's files before reading anything: said once, then POSIX from now on.
    data_->refuse_gds(read.error());
    read = read_records(data_->posix_source(), records, &destination, {}, first_tokens);
    if (read) return std::move(*read);
  }
  ReadOutcome out;
  out.status = read.error();
  return out;
}

}  // namespace kvtier
