// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the read route (read_route.cpp) found of each record it read, for the restore, verify,
// recheck and remote-tier code that acts on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/checksum.hpp"
#include "device/device.hpp"
#include "engine/engine_impl.hpp"

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

}  // namespace kvtier
