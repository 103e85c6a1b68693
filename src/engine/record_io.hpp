// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Turns records (in files, or images in memory) into I/O pieces, maps piece bytes back to records
// and KV tensor rows, and checks a record's header: the one check every tier's bytes pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "io/pipeline.hpp"
#include "kvtier/geometry.hpp"
#include "store/record_format.hpp"

namespace kvtier {

/// Pieces covering a list of records, with the records each piece overlaps.
struct IoPlan {
  std::vector<Piece> pieces;
  std::vector<std::pair<size_t, size_t>> piece_records;  ///< [first, last) record of each piece
  uint64_t extents = 0;  ///< Contiguous file ranges after merging adjacent records.
  uint64_t bytes = 0;
};

/// Merges records that sit back to back in the same file into extents, then splits the extents
/// into pieces of at most `max_piece` bytes (a multiple of 4 KiB, so no header straddles two).
/// `fds[i]` is the file of records[i].
IoPlan plan_io(std::span<const RecordMeta> records, std::span<const int> fds, uint64_t max_piece);

/// Pieces of record images held in memory (header block then payload, no padding): record i is
/// the image a memory channel reads as fd i, its offset set to 0 there, split into pieces of at
/// most `max_piece` bytes.
IoPlan plan_images(std::span<RecordMeta> records, uint64_t max_piece);

/// Cuts `bytes.size()` items (records, in the order a read would take them) into runs read one
/// after another, each of at most `bound` bytes (an item over it alone makes a run), such that
/// every run draws on each group (a drive) in proportion to the group's share of the items: a
/// run of consecutive records would lie on the one or two drives their segments sit on, and
/// leave the others idle until the next run. Within a run a group's items follow each other in
/// their order, one group after another (records back to back on a drive stay mergeable), and a
/// group's items keep their order across runs. `group` and `bytes` are as long. Returns item
/// positions, run by run.
std::vector<std::vector<size_t>> spread_runs(std::span<const uint32_t> group,
                                             std::span<const uint64_t> bytes, uint64_t bound);

/// What a record's header block says of it against what the index expects.
enum class HeaderCheck : uint8_t {
  kMatches,
  kDiffers,     ///< damaged, another record's, or not a header: evidence against the record
  kNotDecoded,  ///< a record coded by a codec this build does not decode: no evidence either way
};

/// Whether a header block decodes for `shape` and describes the record the index expects.
inline HeaderCheck check_header(std::span<const std::byte> block, const RecordMeta& want,
                                const RecordShape& shape) {
  RecordMeta got;
  const Status st = decode_header(block, shape, got);
  if (st.code() == ErrorCode::kNotSupported) return HeaderCheck::kNotDecoded;
  if (!st.ok()) return HeaderCheck::kDiffers;
  const bool same = got.key == want.key && got.token_count == want.token_count &&
                    got.payload_bytes == want.payload_bytes &&
                    got.payload_checksum == want.payload_checksum;
  return same ? HeaderCheck::kMatches : HeaderCheck::kDiffers;
}

enum class Region : uint8_t { kHeader, kPayload, kPadding };

/// Calls fn(record, region, offset_in_region, offset_in_piece, length) for each part of
/// piece `p` of `plan`.
template <typename Fn>
void for_each_region(const IoPlan& plan, std::span<const RecordMeta> records, size_t p, Fn&& fn) {
  const Piece& piece = plan.pieces[p];
  const uint64_t begin = piece.offset;
  const uint64_t end = piece.offset + piece.length;
  for (size_t r = plan.piece_records[p].first; r < plan.piece_records[p].second; ++r) {
    const RecordMeta& m = records[r];
    const uint64_t bounds[4] = {m.offset, m.offset + kBlock, m.offset + kBlock + m.payload_bytes,
                                m.end()};
    const Region kinds[3] = {Region::kHeader, Region::kPayload, Region::kPadding};
    for (int k = 0; k < 3; ++k) {
      uint64_t lo = std::max(begin, bounds[k]);
      uint64_t hi = std::min(end, bounds[k + 1]);
      if (lo < hi) fn(r, kinds[k], lo - bounds[k], lo - begin, hi - lo);
    }
  }
}

}  // namespace kvtier
