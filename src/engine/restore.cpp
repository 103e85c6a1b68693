// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::restore, verify and the read ceiling: read pieces, check headers and checksums as they
// arrive, scatter payloads into the destination.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "common/checksum.hpp"
#include "common/try.hpp"
#include "engine/engine_impl.hpp"
#include "engine/record_io.hpp"

namespace kvtier {

enum class HeaderState : uint8_t { kUnseen, kGood, kBad };
enum class RecordState : uint8_t { kIntact, kCorrupt, kIncomplete };

struct Engine::Impl::ReadOutcome {
  // Pieces of one record may be consumed on different threads; their sums simply add up.
  std::vector<std::atomic<uint64_t>> sums;
  std::vector<std::atomic<uint64_t>> received;  // payload bytes seen per record
  std::vector<HeaderState> header;              // written by the one piece holding the header
  Status status;                                // I/O or device error that stopped the read early
  uint64_t bytes = 0;
  uint64_t extents = 0;
  uint64_t host_bytes = 0;  // accounted host memory traffic (see RestoreResult::host_bytes)

  /// Corrupt means every byte arrived and a check failed; incomplete means an error stopped the
  /// read first (a miss, but no evidence against the record).
  [[nodiscard]] RecordState state(size_t r, const RecordMeta& m) const {
    if (header[r] == HeaderState::kBad) return RecordState::kCorrupt;
    if (header[r] == HeaderState::kUnseen || received[r] != m.payload_bytes)
      return RecordState::kIncomplete;
    return kvsum::finish(sums[r], m.payload_bytes) == m.payload_checksum ? RecordState::kIntact
                                                                         : RecordState::kCorrupt;
  }

  /// Waits for the device's work and adds the sums it computed where the data landed.
  void absorb(DeviceTransfer& transfer) {
    auto device_sums = transfer.finish();
    if (!device_sums) {
      if (status.ok()) status = device_sums.error();
      return;
    }
    for (size_t r = 0; r < sums.size(); ++r) sums[r] += (*device_sums)[r];
  }
};

namespace {

/// The records of a read in token order, their files and first tokens, planned into pieces.
struct ReadPlan {
  std::vector<RecordMeta> records;
  std::vector<int> fds;
  std::vector<uint64_t> first_tokens;
  IoPlan io;

  /// `firsts` gives each record's first token; empty means record i starts at i * chunk_tokens.
  ReadPlan(std::span<const LocatedRecord> located, uint32_t chunk_tokens, uint64_t piece_bytes,
           std::span<const uint64_t> firsts = {}) {
    for (size_t i = 0; i < located.size(); ++i) {
      records.push_back(located[i].meta);
      fds.push_back(located[i].file->fd.get());
      first_tokens.push_back(firsts.empty() ? i * uint64_t{chunk_tokens} : firsts[i]);
    }
    io = plan_io(records, fds, piece_bytes);
  }

  /// An outcome sized for these records.
  void start(Engine::Impl::ReadOutcome& out) const;
};

// Checksumming and scattering a piece costs more CPU than reading it: spread it over the cores
// (the I/O thread mostly sleeps in the kernel).
unsigned consumer_threads() { return std::clamp(std::thread::hardware_concurrency(), 1u, 4u); }

/// What piece `p` of `read` holds: checks its record headers, whose bytes `header_at(offset,
/// bytes)` supplies (a view of host staging, or a copy back from device staging), counts the
/// payload bytes received and lists them in `spans`. Stops at the first error `header_at` returns.
template <typename HeaderAt>
Status classify_piece(const ReadPlan& read, size_t p, const KvGeometry& g,
                      Engine::Impl::ReadOutcome& out, HeaderAt&& header_at,
                      std::vector<PieceSpan>& spans) {
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
/// copied back to be checked here.
class ScatterSink final : public PieceSink {
 public:
  ScatterSink(const ReadPlan& read, DeviceTransfer* transfer, bool device_resident,
              const KvGeometry& g, Engine::Impl::ReadOutcome& out, const ProgressFn& progress)
      : read_(read),
        transfer_(transfer),
        device_resident_(device_resident),
        g_(g),
        out_(out),
        progress_(progress) {}

  Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
    std::vector<PieceSpan> spans;
    alignas(8) std::byte header[kBlock];
    auto header_at = [&](uint64_t in, uint64_t n) -> Result<std::span<const std::byte>> {
      if (!device_resident_) return data.subspan(in, n);
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
      st = device_resident_ ? transfer_->scatter_device(slot, data.data(), spans)
                            : transfer_->scatter(slot, data, spans);
    }
    const uint64_t done = done_ += data.size();
    if (progress_) {
      std::lock_guard lock(progress_mu_);
      progress_(done, read_.io.bytes);
    }
    return st;
  }

  Status release(size_t slot) override {
    return transfer_ == nullptr ? Status() : transfer_->release(slot);
  }

 private:
  const ReadPlan& read_;
  DeviceTransfer* transfer_;
  bool device_resident_;
  const KvGeometry& g_;
  Engine::Impl::ReadOutcome& out_;
  const ProgressFn& progress_;
  std::mutex progress_mu_;
  std::atomic<uint64_t> done_{0};
};

}  // namespace

void ReadPlan::start(Engine::Impl::ReadOutcome& out) const {
  out.sums = std::vector<std::atomic<uint64_t>>(records.size());
  out.received = std::vector<std::atomic<uint64_t>>(records.size());
  out.header.assign(records.size(), HeaderState::kUnseen);
  out.bytes = io.bytes;
  out.extents = io.extents;
}

Result<Engine::Impl::ReadOutcome> Engine::Impl::read_records(
    ByteSource& source, std::span<const LocatedRecord> located, const KvTarget* destination,
    const ProgressFn& progress, std::span<const uint64_t> first_tokens) {
  KVTIER_TRY(source.prepare(located));
  StagingPool& staging = source.staging();
  const ReadPlan read(located, options_.geometry.chunk_tokens, staging.slot_bytes(), first_tokens);
  const IoPlan& plan = read.io;
  ReadOutcome out;
  read.start(out);
  // This read's share of the source's staging, handed back down to an equal share while other
  // operations wait.
  StagingPool::Lease lease = staging.acquire(plan.pieces.size());
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
  KVTIER_EXPECTS(destination != nullptr || !source.device_resident(),
                 "a device-resident source needs a destination");
  ScatterSink sink(read, transfer.get(), source.device_resident(), options_.geometry, out,
                   progress);
  out.status = source.read(located, plan.pieces, lease, sink, consumer_threads());
  if (source.device_resident()) {
    counters_.gds_restores++;
  } else {
    counters_.staging_bytes_read += plan.bytes;
  }
  out.host_bytes = source.host_bytes(plan.bytes);
  if (transfer) {
    out.absorb(*transfer);
    counters_.device_copy_bytes += transfer->device_copy_bytes();
    out.host_bytes += transfer->host_memory_bytes();
  }
  return out;
}

Result<std::vector<bool>> Engine::Impl::restore_from_dram(std::span<const LocatedRecord> records,
                                                          std::vector<DramTier::Hit>& hits,
                                                          const KvTarget& destination,
                                                          uint64_t& host_bytes) {
  // The tier's slabs play the staging pieces: one copy each to the device, verified where it lands.
  std::vector<PayloadToPlace> payloads;
  for (size_t r = 0; r < records.size(); ++r) {
    if (!hits[r]) continue;
    payloads.push_back({hits[r].payload(), r * uint64_t{options_.geometry.chunk_tokens},
                        records[r].meta.token_count, static_cast<uint32_t>(r)});
  }
  KVTIER_ASSIGN_OR_RETURN(Placed placed, place_payloads(destination, payloads, records.size(),
                                                        data_->staging().slot_count()));
  host_bytes += placed.host_bytes;
  const std::vector<uint64_t>& sums = placed.sums;
  std::vector<bool> good(records.size(), false);
  std::vector<Key128> bad;
  for (size_t r = 0; r < records.size(); ++r) {
    if (!hits[r]) continue;
    const RecordMeta& m = records[r].meta;
    good[r] = kvsum::finish(sums[r], m.payload_bytes) == m.payload_checksum;
    if (!good[r]) bad.push_back(m.key);
    hits[r].reset();
  }
  if (!bad.empty()) {
    KVTIER_LOG(
        log_, kWarn,
        "DRAM tier: {} record(s) failed their checksum; dropped from the tier, read from disk",
        bad.size());
    dram_->erase(bad);
  }
  counters_.dram_hits += static_cast<uint64_t>(std::count(good.begin(), good.end(), true));
  return good;
}

Result<RestoreResult> Engine::Impl::restore(std::span<const Token> tokens,
                                            const KvTarget& destination) {
  KVTIER_EXPECTS(!tokens.empty(), "restore: the token list is empty");
  const LatencyTimer timer(counters_.restore_latency);
  counters_.restores++;
  const uint64_t chunk = options_.geometry.chunk_tokens;
  const uint64_t asked = (tokens.size() + chunk - 1) / chunk;
  std::vector<LocatedRecord> found = find_prefix(tokens);
  uint64_t prefix = 0;
  for (const LocatedRecord& r : found) prefix += r.meta.token_count;
  KVTIER_EXPECTS(destination.params.capacity_tokens >= prefix,
                 fmt::format("restore destination: room for {} tokens, {} stored",
                             destination.params.capacity_tokens, prefix));
  RestoreResult result;
  if (found.empty() && !remote_) {
    counters_.restore_misses += asked;
    return result;
  }
  std::vector<RecordState> states(found.size(), RecordState::kIncomplete);

  // DRAM tier first: what it holds needs no disk read.
  std::vector<bool> from_dram(found.size(), false);
  if (dram_) {
    std::vector<DramTier::Hit> hits(found.size());
    size_t n = 0;
    for (size_t r = 0; r < found.size(); ++r) {
      hits[r] = dram_->find(found[r].meta.key, found[r].meta.payload_checksum);
      n += hits[r] ? 1 : 0;
    }
    if (n > 0) {
      KVTIER_ASSIGN_OR_RETURN(from_dram,
                              restore_from_dram(found, hits, destination, result.host_bytes));
      for (size_t r = 0; r < found.size(); ++r) {
        if (from_dram[r]) states[r] = RecordState::kIntact;
      }
    }
  }
  std::vector<LocatedRecord> misses;
  std::vector<size_t> miss_index;
  std::vector<uint64_t> miss_first;
  for (size_t r = 0; r < found.size(); ++r) {
    if (from_dram[r]) continue;
    misses.push_back(found[r]);
    miss_index.push_back(r);
    miss_first.push_back(r * uint64_t{options_.geometry.chunk_tokens});
  }
  if (!misses.empty()) {
    ReadOutcome out = read_from_disk(misses, destination, miss_first);
    result.bytes_read = out.bytes;
    result.extents = out.extents;
    result.host_bytes += out.host_bytes;
    std::vector<RecordState> miss_states(misses.size());
    for (size_t i = 0; i < misses.size(); ++i) miss_states[i] = out.state(i, misses[i].meta);
    result.recheck_kept = recheck_corrupt(misses, miss_first, &destination, miss_states);
    for (size_t i = 0; i < misses.size(); ++i) states[miss_index[i]] = miss_states[i];
    if (!out.status.ok()) result.problem = out.status.to_string();
  }

  std::vector<Key128> corrupt;
  bool prefix_intact = true;
  uint64_t served = 0;
  for (size_t r = 0; r < found.size(); ++r) {
    if (states[r] == RecordState::kCorrupt) corrupt.push_back(found[r].meta.key);
    prefix_intact = prefix_intact && states[r] == RecordState::kIntact;
    if (!prefix_intact) continue;
    result.tokens_restored += found[r].meta.token_count;
    ++served;
    if (!from_dram[r]) counters_.store_hits++;
  }
  // The cluster last: the chunks past what this node served (DRAM tier and local store).
  if (remote_ && served < asked) served += restore_from_remote(tokens, served, destination, result);
  counters_.restore_misses += asked - std::min(asked, served);
  counters_.tokens_restored += result.tokens_restored;
  if (!result.problem.empty()) {
    KVTIER_LOG(log_, kWarn, "restore stopped at {} of {} tokens: {}", result.tokens_restored,
               prefix, result.problem);
  }
  if (!corrupt.empty()) {
    result.checksum_misses = corrupt.size();
    counters_.checksum_misses += corrupt.size();
    KVTIER_LOG(log_, kWarn, "restore: {} record(s) failed their checks and were dropped",
               corrupt.size());
    if (result.problem.empty())
      result.problem = fmt::format("{} corrupt record(s) dropped", corrupt.size());
    KVTIER_TRY(store_->drop(corrupt));
  }
  counters_.bytes_restored += options_.geometry.bytes_for_tokens(result.tokens_restored);
  counters_.restore_host_bytes += result.host_bytes;
  return result;
}

uint64_t Engine::Impl::recheck_corrupt(std::span<const LocatedRecord> records,
                                       std::span<const uint64_t> first_tokens,
                                       const KvTarget* destination, std::span<RecordState> states) {
  std::vector<LocatedRecord> suspects;
  std::vector<uint64_t> suspect_first;
  std::vector<size_t> index;
  for (size_t i = 0; i < records.size(); ++i) {
    if (states[i] != RecordState::kCorrupt) continue;
    suspects.push_back(records[i]);
    suspect_first.push_back(first_tokens.empty() ? 0 : first_tokens[i]);
    index.push_back(i);
  }
  if (suspects.empty()) return 0;
  const std::vector<RecheckOutcome> found = recheck(suspects, suspect_first, destination);
  uint64_t kept = 0, dropped = 0;
  for (size_t j = 0; j < suspects.size(); ++j) {
    RecordState& st = states[index[j]];
    switch (found[j]) {
      case RecheckOutcome::kCorrupt:
        ++dropped;
        break;
      case RecheckOutcome::kIntact:
        st = RecordState::kIntact;
        ++kept;
        break;
      case RecheckOutcome::kIntactNotPlaced:
        st = RecordState::kIncomplete;
        ++kept;
        break;
      case RecheckOutcome::kUnread:
        st = RecordState::kIncomplete;
        break;
    }
  }
  counters_.recheck_kept += kept;
  counters_.recheck_dropped += dropped;
  if (kept > 0) {
    KVTIER_LOG(log_, kWarn,
               "{} record(s) failed a check on the {} path but verified when re-read through the "
               "page cache: kept "
               "(a fault of that data path, not of the records)",
               kept, destination == nullptr ? "verify" : data_->io_name());
  }
  return kept;
}

Engine::Impl::ReadOutcome Engine::Impl::read_from_disk(std::span<const LocatedRecord> records,
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

Result<VerifyReport> Engine::Impl::verify(const ProgressFn& progress) {
  std::vector<LocatedRecord> all = store_->all_records();
  VerifyReport report;
  if (all.empty()) return report;
  KVTIER_ASSIGN_OR_RETURN(ReadOutcome out,
                          read_records(data_->posix_source(), all, nullptr, progress));
  if (!out.status.ok()) return fail(out.status.with_context("verify"));
  std::vector<RecordState> states(all.size());
  for (size_t r = 0; r < all.size(); ++r) states[r] = out.state(r, all[r].meta);
  recheck_corrupt(all, {}, nullptr, states);
  std::vector<Key128> corrupt;
  for (size_t r = 0; r < all.size(); ++r) {
    const RecordMeta& m = all[r].meta;
    ++report.records_checked;
    report.bytes_checked += m.record_bytes();
    if (states[r] != RecordState::kCorrupt) continue;
    corrupt.push_back(m.key);
    report.problems.push_back(fmt::format(
        "segment {} offset {}: {} ({} tokens)", m.segment, m.offset,
        out.header[r] == HeaderState::kGood ? "payload checksum mismatch" : "bad header",
        m.token_count));
  }
  report.corrupt_records = corrupt.size();
  counters_.checksum_misses += corrupt.size();
  KVTIER_TRY(store_->drop(corrupt));
  return report;
}

Result<CeilingResult> Engine::Impl::measure_read_ceiling(std::span<const Token> tokens) {
  std::vector<LocatedRecord> all = tokens.empty() ? store_->all_records() : find_prefix(tokens);
  ByteSource& source = data_->posix_source();
  const ReadPlan read(all, options_.geometry.chunk_tokens, source.staging().slot_bytes());
  const IoPlan& plan = read.io;
  PieceSink discard;
  StagingPool::Lease lease = source.staging().acquire(plan.pieces.size());
  auto start = std::chrono::steady_clock::now();
  KVTIER_TRY(source.read(all, plan.pieces, lease, discard, 0));
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return CeilingResult{plan.bytes, elapsed.count()};
}

}  // namespace kvtier
