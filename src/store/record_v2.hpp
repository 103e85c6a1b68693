// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Format 2's record header (docs/format-v2-plan.md "Record, version 2"): one head group's slice of
// a chunk, of one kind (full attention, sliding window, recurrent state), its payload stored raw or
// compressed, the checksum always over the raw bytes. Not yet written by the store: format 2 is
// built a step at a time, this being the header every later step reads and writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/keys.hpp"
#include "kvtier/status.hpp"
#include "store/record_format.hpp"

namespace kvtier {

inline constexpr uint32_t kFormatVersion2 = 2;
inline constexpr char kRecordMagic2[8] = {'K', 'V', 'T', 'R', 'E', 'C', '0', '2'};

enum class RecordKind : uint32_t {
  kFullAttention = 1,  ///< KV of the model's full-attention layers
  kSlidingWindow = 2,  ///< KV of its sliding-window layers
  kState = 3,          ///< a recurrent layer's state at the chunk's end
};

enum class Codec : uint32_t {
  kRaw = 0,
  kSplit16 = 1,    ///< src/codec/split16.hpp
  kNvcompAns = 2,  ///< for measuring against split16
};

/// The slice of a model one format-2 record holds: `layers` of one kind, head group `group` of
/// `groups` (`heads` heads), and for kState the state's size instead of the KV shape's.
struct Slice2 {
  RecordKind kind = RecordKind::kFullAttention;
  uint32_t layers = 0;
  uint32_t group = 0;
  uint32_t groups = 1;
  uint32_t heads = 0;
  uint32_t head_dim = 0;
  uint32_t element_bytes = 0;
  uint32_t kv_tensors = 2;  ///< 2: K and V; 1: MLA's latent
  uint32_t chunk_tokens = 0;
  uint64_t state_bytes = 0;  ///< kState only

  /// kInvalidArgument naming the field when the slice is not one a store could hold.
  [[nodiscard]] Status validate() const;
  /// The raw (decoded) payload of a record of `tokens` tokens.
  [[nodiscard]] uint64_t raw_bytes(uint32_t tokens) const;
};

/// The first 256 bytes of a format-2 record; the rest of its 4 KiB header block is zero.
struct RecordHeader2 {
  char magic[8];
  uint32_t format_version;
  uint32_t header_bytes;
  Key128 key;
  Key128 parent;
  Key128 namespace_key;
  uint32_t layers;
  uint32_t group;
  uint32_t groups;
  uint32_t heads;
  uint32_t head_dim;
  uint32_t element_bytes;
  uint32_t kv_tensors;
  uint32_t chunk_tokens;
  uint32_t token_count;
  uint32_t kind;
  uint64_t raw_bytes;
  uint64_t stored_bytes;
  uint32_t codec;
  uint32_t checksum_algorithm;
  uint64_t payload_checksum;       ///< kvsum64 of the raw payload, checked after decoding
  uint64_t codec_header_checksum;  ///< XXH3-64 of the codec's tables; 0 for kRaw
  uint64_t sequence;
  uint32_t flags;
  uint32_t zero;
  uint64_t reserved[11];
  uint64_t header_checksum;  ///< XXH3-64 of the 248 bytes before it.
};
static_assert(sizeof(RecordHeader2) == 256);
static_assert(offsetof(RecordHeader2, key) == 16);
static_assert(offsetof(RecordHeader2, layers) == 64);
static_assert(offsetof(RecordHeader2, token_count) == 96);
static_assert(offsetof(RecordHeader2, raw_bytes) == 104);
static_assert(offsetof(RecordHeader2, codec) == 120);
static_assert(offsetof(RecordHeader2, payload_checksum) == 128);
static_assert(offsetof(RecordHeader2, sequence) == 144);
static_assert(offsetof(RecordHeader2, header_checksum) == 248);

/// What a format-2 header says of its record besides the slice.
struct RecordMeta2 {
  Key128 key;
  Key128 parent;
  uint32_t token_count = 0;
  Codec codec = Codec::kRaw;
  uint64_t raw_bytes = 0;
  uint64_t stored_bytes = 0;  ///< what follows the header, before padding
  uint64_t payload_checksum = 0;
  uint64_t codec_header_checksum = 0;
  uint64_t sequence = 0;

  [[nodiscard]] uint64_t record_bytes() const { return kBlock + align_up(stored_bytes); }
};

/// Writes the 4 KiB header block of `meta` for `slice` into `block` (zeroing the rest).
void encode_header2(const RecordMeta2& meta, const Slice2& slice, const Key128& ns,
                    std::span<std::byte> block);

/// Parses and checks a format-2 header block: magic, version, checksum, that it holds `slice`
/// (kGeometryMismatch otherwise), and that its sizes agree with each other and with the slice
/// (kCorrupt): the raw size is the slice's for its token count, a raw record stores exactly that,
/// a compressed one less. A format-1 record is kFormatVersion.
[[nodiscard]] Status decode_header2(std::span<const std::byte> block, const Slice2& slice,
                                    RecordMeta2& meta);

}  // namespace kvtier
