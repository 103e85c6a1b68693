// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one read route every tier's bytes go through (read_route.cpp), and what it found of each
// record it read, for the tiers, verify and recheck that act on it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <optional>
#include <span>
#include <vector>

#include "common/checksum.hpp"
#include "datapath/transfer_kit.hpp"
#include "device/device.hpp"
#include "engine/counters.hpp"
#include "engine/record_codec.hpp"
#include "kvtier/engine.hpp"
#include "store/store.hpp"

namespace kvtier {

enum class HeaderState : uint8_t { kUnseen, kGood, kBad };
enum class RecordState : uint8_t { kIntact, kCorrupt, kIncomplete };

struct ReadOutcome {
  // Pieces of one record may be consumed on different threads; their sums simply add up.
  std::vector<std::atomic<uint64_t>> sums;
  std::vector<std::atomic<uint64_t>> received;  // payload bytes seen per record
  std::vector<HeaderState> header;              // written by the one piece holding the header
  /// Per record, the payload bytes its sum covers and that must arrive: the stored ones, or the
  /// decoded ones of a coded record (decoded before it landed).
  std::vector<uint64_t> payload;
  Status status;  // I/O or device error that stopped the read early
  uint64_t bytes = 0;
  uint64_t extents = 0;
  uint64_t host_bytes = 0;  // accounted host memory traffic (see RestoreResult::host_bytes)

  /// Corrupt means every byte arrived and a check failed; incomplete means an error stopped the
  /// read first (a miss, but no evidence against the record).
  [[nodiscard]] RecordState state(size_t r, const RecordMeta& m) const {
    if (header[r] == HeaderState::kBad) return RecordState::kCorrupt;
    if (header[r] == HeaderState::kUnseen || received[r] != payload[r])
      return RecordState::kIncomplete;
    return kvsum::finish(sums[r], payload[r]) == m.payload_checksum ? RecordState::kIntact
                                                                    : RecordState::kCorrupt;
  }

  /// Sized for `records` records, each unseen (incomplete until a read fills it in).
  void size_for(size_t records) {
    sums = std::vector<std::atomic<uint64_t>>(records);
    received = std::vector<std::atomic<uint64_t>>(records);
    header.assign(records, HeaderState::kUnseen);
    payload.assign(records, 0);
  }

  /// Waits for the device's work and adds the sums it computed where the data landed.
  void absorb(DeviceTransfer& transfer) {
    auto device_sums = transfer.finish();
    if (!device_sums) {
      if (status.ok()) status = device_sums.error();
      return;
    }
    for (size_t r = 0; r < sums.size(); ++r) sums[r] += (*device_sums)[r];
    for (uint32_t r : transfer.decode_failures()) header[r] = HeaderState::kBad;
  }
};

/// Consumer threads of a read of `slots` staging slots (`set`: KVTIER_CONSUMER_THREADS). Into host
/// memory a consumer checksums and copies each piece, which costs more CPU than reading it: as many
/// as the cores, up to 4 (the I/O thread mostly sleeps in the kernel). Into a device a consumer
/// queues the piece's copy and then sleeps until it is done, before the slot goes back to be read
/// into again: one a slot (64 at most), so every slot's copy can be under way at once. Measured
/// against 4 (docs/results/consumer-threads-h100): 1.12-1.35x the rate where reads had waited for
/// a consumer 25-39% of their time, for 0.04-0.06 core-s more a GB.
[[nodiscard]] unsigned consumer_threads(bool device, size_t slots, std::optional<uint32_t> set);

/// The files of `records` (those with one), each once, as a channel moves them.
[[nodiscard]] std::vector<ChannelFile> channel_files(std::span<const LocatedRecord> records);

/// @brief The one read route: whatever channel a tier hands it, plans the records into pieces,
/// leases the channel's staging (the bound on bytes in flight), begins a device transfer, checks
/// every header (check_header) and payload checksum as pieces arrive, scatters payloads into the
/// destination (verified where they land) and accounts. Thread-safe.
class ReadRoute {
 public:
  /// `coded_run_bytes`: decoded bytes of coded records a read into device memory holds room for
  /// at a time (kCodedRunBytes unless KVTIER_CODED_RUN_BYTES says otherwise).
  /// `counters`: where the route counts device copies and its staging slots' time.
  /// `consumer_threads`: how many threads take each read's pieces as they land (unset: as many as
  /// the cores, up to 4, into host memory; one per staging slot into a device).
  ReadRoute(TransferKit& kit, RecordShape shape, EngineCounters& counters,
            uint64_t coded_run_bytes = kCodedRunBytes,
            std::optional<uint32_t> consumer_threads = std::nullopt)
      : kit_(kit),
        shape_(std::move(shape)),
        counters_(counters),
        coded_run_bytes_(coded_run_bytes),
        consumer_threads_(consumer_threads) {}

  /// Reads `records` through `channel` into `destination` (or, with none, checks them on the
  /// host: a host-resident channel only). A record with a file is read from it; one without is
  /// image i of a memory channel, i its index here. `first_tokens[i]`: record i's first token
  /// (empty: i * chunk). `keep[i]`, when given, receives record i's header and payload as they
  /// land on the host (a move between tiers). An error before anything was read (the channel
  /// refuses these files) is returned as such; later ones are in ReadOutcome::status.
  [[nodiscard]] Result<ReadOutcome> read(Channel& channel, std::span<const LocatedRecord> records,
                                         const KvMemory* destination,
                                         std::span<const uint64_t> first_tokens = {},
                                         const ProgressFn& progress = {},
                                         std::span<const std::span<std::byte>> keep = {});
  /// Reads record images a tier holds in host memory (`images[i]` that of `records[i]`: header
  /// block then payload) into `destination` through a memory channel.
  [[nodiscard]] Result<ReadOutcome> read_images(std::span<const LocatedRecord> records,
                                                std::vector<std::span<const std::byte>> images,
                                                std::span<const uint64_t> first_tokens,
                                                const KvMemory& destination);

  /// For a tier whose records arrive from far away (the cluster): runs fetch(begin, stop) for
  /// batches of [first, end) ahead of place(batch), which takes them in order on this thread,
  /// with no more than the route's bound on bytes in flight (the staging pool) fetched and not yet
  /// placed; small batches of a quarter of it, the next sent as soon as the oldest has arrived,
  /// so no source idles while one batch waits for its slowest record. Stops after the first
  /// place() that returns false; every fetch started is waited for.
  template <typename Fetch, typename Place>
  void prefetch(size_t first, size_t end, uint64_t record_bytes, Fetch&& fetch, Place&& place) {
    const StagingPool& staging = kit_.staging();
    const uint64_t bound =
        std::max<uint64_t>(1, staging.bytes() / std::max<uint64_t>(1, record_bytes));
    const uint64_t batch = std::max<uint64_t>(1, bound / 4);
    const size_t depth = std::max<uint64_t>(1, bound / batch);  // the batch being placed included
    using Batch = decltype(fetch(first, end));
    std::deque<std::future<Batch>> outstanding;  // waited for on every way out
    size_t sent = first;
    auto top_up = [&](size_t limit) {
      while (sent < end && outstanding.size() < limit) {
        const size_t stop = std::min<size_t>(end, sent + batch);
        outstanding.push_back(std::async(std::launch::async, fetch, sent, stop));
        sent = stop;
      }
    };
    // Topped up at each turn, once the batch placed before is gone: with room for one batch only
    // (depth 1), the next is asked for after the one before was placed.
    for (;;) {
      top_up(depth);
      if (outstanding.empty()) break;
      Batch current = outstanding.front().get();
      outstanding.pop_front();
      top_up(depth - 1);
      if (!place(current)) break;
    }
  }

  [[nodiscard]] TransferKit& kit() { return kit_; }

 private:
  /// read() through one channel of host or device residency (none coded on a device-resident
  /// one): raw records land as they are read, coded ones once all their bytes arrived, decoded
  /// where the device decodes (DeviceTransfer::expect_coded) or on the consumer threads.
  [[nodiscard]] Result<ReadOutcome> read_stored(Channel& channel,
                                                std::span<const LocatedRecord> records,
                                                const KvMemory* destination,
                                                std::span<const uint64_t> first_tokens,
                                                const ProgressFn& progress,
                                                std::span<const std::span<std::byte>> keep);
  /// read() of records some of which are coded (`coded`: their indexes, ascending), in runs that
  /// bound the room their decoding holds; the coded ones through host memory.
  [[nodiscard]] Result<ReadOutcome> read_coded(
      Channel& channel, std::span<const LocatedRecord> records, std::span<const size_t> coded,
      const KvMemory* destination, std::span<const uint64_t> first_tokens,
      const ProgressFn& progress, std::span<const std::span<std::byte>> keep);

  TransferKit& kit_;
  const RecordShape shape_;
  EngineCounters& counters_;
  uint64_t coded_run_bytes_;
  std::optional<uint32_t> consumer_threads_;
};

}  // namespace kvtier
