// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/record_format.hpp"

#include <xxhash.h>

#include <cstring>

#include <fmt/format.h>

#include "store/record_v2.hpp"

namespace kvtier {
namespace {

uint64_t header_checksum(const RecordHeader& h) {
  return XXH3_64bits(&h, offsetof(RecordHeader, header_checksum));
}

Status corrupt(std::string message) { return {ErrorCode::kCorrupt, std::move(message)}; }

/// The slice a format-2 store's record holds (RecordShape).
Slice2 slice_of(const RecordShape& shape) {
  const KvGeometry& g = shape.geometry;
  Slice2 s;
  s.kind = static_cast<RecordKind>(shape.kind);
  if (s.kind == RecordKind::kState) s.state_bytes = g.bytes_for_tokens(g.chunk_tokens);
  s.layers = g.layers;
  s.group = g.tp_rank;
  s.groups = g.tp_world;
  s.heads = g.kv_heads;
  s.head_dim = g.head_dim;
  s.element_bytes = g.element_bytes;
  s.kv_tensors = g.kv_tensors;
  s.chunk_tokens = g.chunk_tokens;
  return s;
}

void encode_header1(const RecordMeta& meta, const KvGeometry& geometry, const Key128& ns,
                    std::span<std::byte> block) {
  RecordHeader h{};
  std::memcpy(h.magic, kRecordMagic, sizeof(h.magic));
  h.format_version = kFormatVersion;
  h.header_bytes = kBlock;
  h.key = meta.key;
  h.parent = meta.parent;
  h.namespace_key = ns;
  h.layers = geometry.layers;
  h.kv_heads = geometry.kv_heads;
  h.head_dim = geometry.head_dim;
  h.element_bytes = geometry.element_bytes;
  h.chunk_tokens = geometry.chunk_tokens;
  h.tp_rank = geometry.tp_rank;
  h.tp_world = geometry.tp_world;
  h.token_count = meta.token_count;
  h.payload_bytes = meta.payload_bytes;
  h.payload_checksum = meta.payload_checksum;
  h.checksum_algorithm = kChecksumKvsum64;
  h.sequence = meta.sequence;
  h.header_checksum = header_checksum(h);
  std::memset(block.data(), 0, kBlock);
  std::memcpy(block.data(), &h, sizeof(h));
}

Status decode_header1(std::span<const std::byte> block, const KvGeometry& geometry,
                      RecordMeta& meta) {
  if (block.size() < sizeof(RecordHeader)) return corrupt("record header truncated");
  RecordHeader h;
  std::memcpy(&h, block.data(), sizeof(h));
  if (std::memcmp(h.magic, kRecordMagic, sizeof(h.magic)) != 0) return corrupt("bad record magic");
  if (h.header_checksum != header_checksum(h)) return corrupt("record header checksum mismatch");
  if (h.format_version != kFormatVersion) {
    return {ErrorCode::kFormatVersion, fmt::format("record format version {} (this build reads {})",
                                                   h.format_version, kFormatVersion)};
  }
  if (h.header_bytes != kBlock || h.checksum_algorithm != kChecksumKvsum64) {
    return corrupt("record header describes an unknown layout");
  }
  if (h.layers != geometry.layers || h.kv_heads != geometry.kv_heads ||
      h.head_dim != geometry.head_dim || h.element_bytes != geometry.element_bytes ||
      h.chunk_tokens != geometry.chunk_tokens || h.tp_rank != geometry.tp_rank ||
      h.tp_world != geometry.tp_world) {
    return {ErrorCode::kGeometryMismatch, "record was written for another geometry or TP rank"};
  }
  if (h.token_count == 0 || h.token_count > geometry.chunk_tokens ||
      h.payload_bytes != geometry.bytes_for_tokens(h.token_count)) {
    return corrupt(fmt::format("record token count {} / payload {} inconsistent", h.token_count,
                               h.payload_bytes));
  }
  meta.key = h.key;
  meta.parent = h.parent;
  meta.token_count = h.token_count;
  meta.payload_bytes = h.payload_bytes;
  meta.payload_checksum = h.payload_checksum;
  meta.sequence = h.sequence;
  return {};
}

}  // namespace

uint64_t raw_payload_bytes(const RecordShape& shape, uint32_t tokens) {
  if (shape.version == kFormatVersion) return shape.geometry.bytes_for_tokens(tokens);
  return slice_of(shape).raw_bytes(tokens);
}

void encode_header(const RecordMeta& meta, const RecordShape& shape, const Key128& ns,
                   std::span<std::byte> block) {
  if (shape.version == kFormatVersion) return encode_header1(meta, shape.geometry, ns, block);
  const Slice2 slice = slice_of(shape);
  RecordMeta2 m;
  m.key = meta.key;
  m.parent = meta.parent;
  m.token_count = meta.token_count;
  m.raw_bytes = slice.raw_bytes(meta.token_count);
  m.stored_bytes = meta.payload_bytes;
  // A split16 stream carries its own table checksum (split16_format.hpp), checked before any
  // block is decoded: the header needs none of the codec's.
  m.codec = m.stored_bytes < m.raw_bytes ? Codec::kSplit16 : Codec::kRaw;
  m.payload_checksum = meta.payload_checksum;
  m.sequence = meta.sequence;
  encode_header2(m, slice, ns, block);
}

Status decode_header(std::span<const std::byte> block, const RecordShape& shape, RecordMeta& meta) {
  if (shape.version == kFormatVersion) return decode_header1(block, shape.geometry, meta);
  RecordMeta2 m;
  if (Status st = decode_header2(block, slice_of(shape), m); !st.ok()) return st;
  if (m.codec != Codec::kRaw && m.codec != Codec::kSplit16) {
    return {ErrorCode::kNotSupported,
            fmt::format("record stored with codec {}, which this build does not decode",
                        static_cast<uint32_t>(m.codec))};
  }
  meta.key = m.key;
  meta.parent = m.parent;
  meta.token_count = m.token_count;
  meta.payload_bytes = m.stored_bytes;
  meta.payload_checksum = m.payload_checksum;
  meta.sequence = m.sequence;
  return {};
}

}  // namespace kvtier
