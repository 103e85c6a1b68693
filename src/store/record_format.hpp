// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Segment records: a 4 KiB self-describing header, the payload, zero padding to 4 KiB.
// Byte-by-byte layout in docs/format.md ("Record"); offsets are pinned by static_asserts.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "common/keys.hpp"
#include "kvtier/geometry.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

static_assert(std::endian::native == std::endian::little,
              "kvtier's on-disk format is little-endian");

inline constexpr uint64_t kBlock = 4096;
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kChecksumKvsum64 = 1;
inline constexpr char kRecordMagic[8] = {'K', 'V', 'T', 'R', 'E', 'C', '0', '1'};

constexpr uint64_t align_up(uint64_t v, uint64_t a = kBlock) { return (v + a - 1) / a * a; }

/// The first 256 bytes of a record; the rest of its 4 KiB header block is zero.
struct RecordHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t header_bytes;
  Key128 key;
  Key128 parent;
  Key128 namespace_key;
  uint32_t layers;
  uint32_t kv_heads;
  uint32_t head_dim;
  uint32_t element_bytes;
  uint32_t chunk_tokens;
  uint32_t tp_rank;
  uint32_t tp_world;
  uint32_t token_count;
  uint64_t payload_bytes;
  uint64_t payload_checksum;
  uint32_t checksum_algorithm;
  uint32_t flags;
  uint64_t sequence;
  uint64_t reserved[15];
  uint64_t header_checksum;  ///< XXH3-64 of the 248 bytes before it.
};
static_assert(sizeof(RecordHeader) == 256);
static_assert(offsetof(RecordHeader, key) == 16);
static_assert(offsetof(RecordHeader, layers) == 64);
static_assert(offsetof(RecordHeader, payload_bytes) == 96);
static_assert(offsetof(RecordHeader, sequence) == 120);
static_assert(offsetof(RecordHeader, header_checksum) == 248);

/// What the index knows of a record.
struct RecordMeta {
  Key128 key;
  Key128 parent;
  uint32_t segment = 0;
  uint32_t token_count = 0;
  uint64_t offset = 0;  ///< Of the header, in the segment file; a multiple of 4 KiB.
  uint64_t payload_bytes = 0;
  uint64_t payload_checksum = 0;
  uint64_t sequence = 0;

  /// Bytes the record takes in its segment: header block plus padded payload.
  [[nodiscard]] uint64_t record_bytes() const { return kBlock + align_up(payload_bytes); }
  [[nodiscard]] uint64_t end() const { return offset + record_bytes(); }
};
static_assert(sizeof(RecordMeta) == 72);

/// What a store's records hold and which header says so: format 1's (a TP rank's KV) or format
/// 2's (a head group's: the geometry's kv_heads are the group's heads, its tp_rank and tp_world the
/// group and the groups; src/store/record_v2.hpp). A geometry alone is format 1.
struct RecordShape {
  KvGeometry geometry;
  uint32_t version = kFormatVersion;
  /// Format 2's record kind (RecordKind): 1 full-attention KV, 2 sliding-window KV, 3 a recurrent
  /// state, whose bytes the geometry describes as one chunk of `chunk_tokens` rows.
  uint32_t kind = 1;
  RecordShape(KvGeometry g, uint32_t v = kFormatVersion,  // NOLINT: a geometry is format 1's shape
              uint32_t k = 1)
      : geometry(std::move(g)), version(v), kind(k) {}
};

/// The decoded payload of a record of `tokens` tokens in `shape`'s store. A format-2 record whose
/// RecordMeta::payload_bytes (what it stores) is less holds it coded by split16
/// (src/codec/split16.hpp); format 1 stores every record raw.
[[nodiscard]] uint64_t raw_payload_bytes(const RecordShape& shape, uint32_t tokens);

/// Whether a record of `tokens` tokens in `shape`'s store may store `payload` bytes: its raw
/// payload, or in format 2 a coded one of fewer bytes and more than half of them (a split16
/// stream keeps each 16-bit word's sign-and-mantissa byte, so a shorter one is truncated).
[[nodiscard]] inline bool payload_size_fits(const RecordShape& shape, uint32_t tokens,
                                            uint64_t payload) {
  const uint64_t raw = raw_payload_bytes(shape, tokens);
  return payload == raw || (shape.version != kFormatVersion && payload > raw / 2 && payload < raw);
}

/// Whether `meta` stores its payload coded (fewer bytes than it decodes to).
[[nodiscard]] inline bool is_coded(const RecordMeta& meta, const RecordShape& shape) {
  return meta.payload_bytes < raw_payload_bytes(shape, meta.token_count);
}

/// Writes the 4 KiB header block of `meta` into `block` (zeroing the rest), in `shape`'s format
/// (format 2: codec split16 where the payload is coded, is_coded).
void encode_header(const RecordMeta& meta, const RecordShape& shape, const Key128& ns,
                   std::span<std::byte> block);

/// Parses and checks a header block: magic, version, header checksum, and that it was written for
/// `geometry` (tenants share a store, so the namespace is not checked: the key carries it).
/// Fills meta except meta.segment and meta.offset; payload_bytes is what the record stores.
[[nodiscard]] Status decode_header(std::span<const std::byte> block, const RecordShape& shape,
                                   RecordMeta& meta);

}  // namespace kvtier
