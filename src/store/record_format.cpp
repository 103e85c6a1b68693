// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/record_format.hpp"

#include <xxhash.h>

#include <cstring>

#include <fmt/format.h>

namespace kvtier {
namespace {

uint64_t header_checksum(const RecordHeader& h) {
  return XXH3_64bits(&h, offsetof(RecordHeader, header_checksum));
}

Status corrupt(std::string message) { return {ErrorCode::kCorrupt, std::move(message)}; }

}  // namespace

void encode_header(const RecordMeta& meta, const KvGeometry& geometry, const Key128& ns,
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

Status decode_header(std::span<const std::byte> block, const KvGeometry& geometry,
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

}  // namespace kvtier
