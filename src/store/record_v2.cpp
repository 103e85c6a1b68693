// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/record_v2.hpp"

#include <xxhash.h>

#include <cstring>

#include <fmt/format.h>

namespace kvtier {
namespace {

uint64_t header_checksum(const RecordHeader2& h) {
  return XXH3_64bits(&h, offsetof(RecordHeader2, header_checksum));
}

Status corrupt(std::string message) { return {ErrorCode::kCorrupt, std::move(message)}; }

/// a * b, or 0 when it does not fit 64 bits (no slice a store holds comes near).
uint64_t times(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? 0 : out;
}

bool known(uint32_t kind) { return kind >= 1 && kind <= 3; }

}  // namespace

Status Slice2::validate() const {
  auto bad = [](std::string what) { return Status{ErrorCode::kInvalidArgument, "slice: " + what}; };
  if (!known(static_cast<uint32_t>(kind))) return bad("unknown record kind");
  if (groups == 0 || group >= groups) return bad(fmt::format("group {} of {}", group, groups));
  if (chunk_tokens == 0) return bad("chunk of 0 tokens");
  if (kind == RecordKind::kState) {
    if (state_bytes == 0) return bad("a state record of 0 bytes");
    return {};
  }
  if (layers == 0 || heads == 0 || head_dim == 0 || element_bytes == 0) {
    return bad("layers, heads, head_dim and element_bytes must be positive");
  }
  if (kv_tensors != 1 && kv_tensors != 2) return bad(fmt::format("{} kv tensors", kv_tensors));
  if (raw_bytes(chunk_tokens) == 0) return bad("a chunk's bytes overflow 64 bits");
  return {};
}

uint64_t Slice2::raw_bytes(uint32_t tokens) const {
  if (kind == RecordKind::kState) return state_bytes;
  return times(times(times(times(times(kv_tensors, layers), tokens), heads), head_dim),
               element_bytes);
}

void encode_header2(const RecordMeta2& meta, const Slice2& slice, const Key128& ns,
                    std::span<std::byte> block) {
  RecordHeader2 h{};
  std::memcpy(h.magic, kRecordMagic2, sizeof(h.magic));
  h.format_version = kFormatVersion2;
  h.header_bytes = kBlock;
  h.key = meta.key;
  h.parent = meta.parent;
  h.namespace_key = ns;
  h.layers = slice.layers;
  h.group = slice.group;
  h.groups = slice.groups;
  h.heads = slice.heads;
  h.head_dim = slice.head_dim;
  h.element_bytes = slice.element_bytes;
  h.kv_tensors = slice.kv_tensors;
  h.chunk_tokens = slice.chunk_tokens;
  h.token_count = meta.token_count;
  h.kind = static_cast<uint32_t>(slice.kind);
  h.raw_bytes = meta.raw_bytes;
  h.stored_bytes = meta.stored_bytes;
  h.codec = static_cast<uint32_t>(meta.codec);
  h.checksum_algorithm = kChecksumKvsum64;
  h.payload_checksum = meta.payload_checksum;
  h.codec_header_checksum = meta.codec_header_checksum;
  h.sequence = meta.sequence;
  h.header_checksum = header_checksum(h);
  std::memset(block.data(), 0, kBlock);
  std::memcpy(block.data(), &h, sizeof(h));
}

Status decode_header2(std::span<const std::byte> block, const Slice2& slice, RecordMeta2& meta) {
  if (block.size() < sizeof(RecordHeader2)) return corrupt("record header truncated");
  RecordHeader2 h;
  std::memcpy(&h, block.data(), sizeof(h));
  if (std::memcmp(h.magic, kRecordMagic, sizeof(h.magic)) == 0) {
    return {ErrorCode::kFormatVersion, "a format-1 record where format 2 was expected"};
  }
  if (std::memcmp(h.magic, kRecordMagic2, sizeof(h.magic)) != 0) {
    return corrupt("bad record magic");
  }
  if (h.header_checksum != header_checksum(h)) return corrupt("record header checksum mismatch");
  if (h.format_version != kFormatVersion2) {
    return {ErrorCode::kFormatVersion, fmt::format("record format version {} (this reads {})",
                                                   h.format_version, kFormatVersion2)};
  }
  if (h.header_bytes != kBlock || h.checksum_algorithm != kChecksumKvsum64 || h.zero != 0) {
    return corrupt("record header describes an unknown layout");
  }
  if (!known(h.kind) || h.codec > static_cast<uint32_t>(Codec::kNvcompAns)) {
    return corrupt(fmt::format("record kind {} / codec {} unknown", h.kind, h.codec));
  }
  if (static_cast<RecordKind>(h.kind) != slice.kind || h.layers != slice.layers ||
      h.group != slice.group || h.groups != slice.groups || h.heads != slice.heads ||
      h.head_dim != slice.head_dim || h.element_bytes != slice.element_bytes ||
      h.kv_tensors != slice.kv_tensors || h.chunk_tokens != slice.chunk_tokens) {
    return {ErrorCode::kGeometryMismatch, "record holds another slice of the model"};
  }
  if (h.token_count == 0 || h.token_count > slice.chunk_tokens ||
      h.raw_bytes != slice.raw_bytes(h.token_count) || h.raw_bytes == 0) {
    return corrupt(fmt::format("record token count {} / raw payload {} inconsistent", h.token_count,
                               h.raw_bytes));
  }
  const auto codec = static_cast<Codec>(h.codec);
  if (codec == Codec::kRaw ? h.stored_bytes != h.raw_bytes || h.codec_header_checksum != 0
                           : h.stored_bytes == 0 || h.stored_bytes >= h.raw_bytes) {
    return corrupt(fmt::format("record stores {} bytes of {} raw with codec {}", h.stored_bytes,
                               h.raw_bytes, h.codec));
  }
  meta.key = h.key;
  meta.parent = h.parent;
  meta.token_count = h.token_count;
  meta.codec = codec;
  meta.raw_bytes = h.raw_bytes;
  meta.stored_bytes = h.stored_bytes;
  meta.payload_checksum = h.payload_checksum;
  meta.codec_header_checksum = h.codec_header_checksum;
  meta.sequence = h.sequence;
  return {};
}

}  // namespace kvtier
