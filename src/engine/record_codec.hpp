// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A record's payload coded and decoded (Options::compression): what a save stores and what a
// restore turns back into KV before it lands, the checksum always over the decoded bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier {

/// A record is kept coded only when that saves at least 1/kCodedSaving of its bytes: below that
/// the decode costs more than the bytes not read.
inline constexpr uint64_t kCodedSaving = 20;

/// A restore of coded records holds room for the stored and decoded payloads of at most this many
/// decoded bytes at a time (device memory where the GPU decodes): small next to a GPU's memory, and
/// large enough that the read pipeline seldom drains between runs on one drive (30 ms at 8 GB/s);
/// a run spread over D drives (spread_runs) lasts a D-th of that, so there each run's start and
/// drain weigh more.
inline constexpr uint64_t kCodedRunBytes = uint64_t{256} << 20;

/// The end of the run of items from `first` (of `n`) whose bytes (`bytes_of(i)`) add up to at most
/// `bound`, the first always in it: what a coded save or restore holds at a time (a save, a
/// staging's worth in host memory; a restore into GPU memory, kCodedRunBytes of room) stays
/// bounded whatever the session's length.
template <typename BytesOf>
[[nodiscard]] size_t staging_run_end(size_t first, size_t n, uint64_t bound, BytesOf&& bytes_of) {
  size_t end = first;
  for (uint64_t bytes = 0; end < n; ++end) {
    const uint64_t b = bytes_of(end);
    if (end > first && bytes + b > bound) break;
    bytes += b;
  }
  return end;
}

/// `raw` coded by split16 when that saves at least 1/kCodedSaving of it; nullopt: keep it raw.
[[nodiscard]] Result<std::optional<std::vector<std::byte>>> code_payload(
    std::span<const std::byte> raw);

/// code_payload() of each of `raw` into `coded` (as long), on up to four threads: coding costs
/// more CPU than writing the bytes it saves.
[[nodiscard]] Status code_payloads(std::span<const std::vector<std::byte>> raw,
                                   std::span<std::optional<std::vector<std::byte>>> coded);

/// Decodes a coded record's `stored` payload into `raw`, which must be as long as the record's raw
/// payload. Any damage is kCorrupt, never a write outside `raw`; the record's checksum, checked
/// over `raw` afterwards, proves the bytes right.
[[nodiscard]] Status decode_payload(std::span<const std::byte> stored, std::span<std::byte> raw);

}  // namespace kvtier
