// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// split16: a lossless codec for 16-bit floating-point KV (bf16, fp16) whose blocks decode
// independently, so a GPU decodes one block per thread block (docs/format-v2-plan.md, codec 1).
//
// Each 16-bit word is split into a symbol, bits 14..7 (bf16's exponent), and a rest byte, the sign
// and bits 6..0 (bf16's mantissa). Mantissas are close to random and are kept as they are; the
// exponents of KV cluster in a few values, so each block of words stores its symbols as
// fixed-width codes into a small codebook of the block's most frequent symbols, with the rare
// others as escapes listed in order. A block that would not shrink is stored raw.
//
// Stream: header (40 bytes) | block table (16 bytes a block) | blocks. The header's table checksum
// covers the table, so a decoder never trusts a damaged offset. Every field a decoder reads is
// checked against the stream's size before use: any input either decodes to exactly the declared
// bytes or is refused (kCorrupt), never read or written out of bounds. The payload checksum of the
// record (kvsum64 over the decoded bytes) is what proves the bytes right.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <vector>

#include "codec/split16_format.hpp"
#include "kvtier/status.hpp"

namespace kvtier::codec {

/// A stream's header and table, checked: every block lies inside the stream, in order, with a
/// known mode and width; what a block's own data says (its escapes) is checked as it is decoded.
struct Split16Table {
  uint64_t decoded_bytes = 0;
  uint64_t data_offset = 0;  ///< where the first block starts in the stream
  /// The stream's whole size as its table says: a header_only caller holds this many bytes before
  /// any block is decoded (the CUDA decoder trusts the table and does not check).
  uint64_t stored_bytes = 0;
  std::vector<Split16Block> blocks;
  uint8_t tail = 0;  ///< the last byte of an odd-sized payload
};

/// The most bytes an encoding of `raw_bytes` bytes takes: headers and table plus the raw bytes;
/// SIZE_MAX past kSplit16MaxBytes (which no stream holds).
[[nodiscard]] size_t split16_bound(size_t raw_bytes);

/// Encodes `raw` (at most kSplit16MaxBytes) into `out` (at least split16_bound(raw.size()) bytes);
/// returns the bytes written.
[[nodiscard]] Result<size_t> split16_encode(std::span<const std::byte> raw,
                                            std::span<std::byte> out);

/// Checks a stream's header and table (the bytes of both must be in `stored`; the blocks' data
/// need not be when `header_only`): what a decoder on another device needs to plan its work.
[[nodiscard]] Result<Split16Table> split16_table(std::span<const std::byte> stored,
                                                 bool header_only = false);

/// The decoded size a stream declares, after checking its header and table.
[[nodiscard]] Result<uint64_t> split16_decoded_bytes(std::span<const std::byte> stored);

/// Decodes `stored` into `raw`, which must be exactly split16_decoded_bytes(stored) long.
[[nodiscard]] Status split16_decode(std::span<const std::byte> stored, std::span<std::byte> raw);

}  // namespace kvtier::codec
