// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "codec/split16.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace kvtier::codec {
namespace {

// Fields and words are copied as they lie in memory: the stream is little-endian (split16_format).
static_assert(std::endian::native == std::endian::little, "split16 assumes a little-endian host");

constexpr size_t kHeaderBytes = kSplit16HeaderBytes;
constexpr size_t kEntryBytes = kSplit16EntryBytes;
constexpr uint8_t kRaw = kSplit16Raw;
constexpr uint8_t kCoded = kSplit16Coded;
constexpr uint32_t kMaxBits = kSplit16MaxBits;

template <typename T>
void put(std::byte* at, T v) {
  std::memcpy(at, &v, sizeof v);
}
template <typename T>
T get(const std::byte* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

using Entry = Split16Block;

Status corrupt(const std::string& why) { return {ErrorCode::kCorrupt, "split16 stream: " + why}; }

uint8_t symbol_of(uint16_t w) { return static_cast<uint8_t>(w >> 7); }
uint8_t rest_of(uint16_t w) { return static_cast<uint8_t>(((w >> 8) & 0x80) | (w & 0x7f)); }

uint64_t table_checksum(const std::byte* header, const std::byte* table, size_t table_bytes) {
  return XXH3_64bits_withSeed(table, table_bytes, XXH3_64bits(header, 32));
}

/// Encodes one block of `words` words at `out`; returns its entry (offset left to the caller).
Entry encode_block(const uint16_t* w, uint32_t words, std::byte* out) {
  std::array<uint32_t, 256> count{};
  for (uint32_t i = 0; i < words; ++i) ++count[symbol_of(w[i])];
  std::array<uint8_t, 256> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint8_t a, uint8_t b) { return count[a] > count[b]; });
  Entry best{.bytes = words * 2, .words = words};
  for (uint32_t bits = 1; bits <= kMaxBits; ++bits) {
    uint32_t k = (1u << bits) - 1, covered = 0, used = 0;
    for (; used < k && count[order[used]] > 0; ++used) covered += count[order[used]];
    const uint64_t size = split16_coded_bytes(words, bits, used, words - covered);
    if (size < best.bytes) {
      best = {.bytes = static_cast<uint32_t>(size),
              .words = words,
              .mode = kCoded,
              .bits = static_cast<uint8_t>(bits),
              .codebook = static_cast<uint8_t>(used)};
    }
  }
  if (best.mode == kRaw) {
    std::memcpy(out, w, size_t{words} * 2);
    return best;
  }
  std::array<int, 256> code;
  code.fill(-1);
  for (uint32_t c = 0; c < best.codebook; ++c) code[order[c]] = static_cast<int>(c);
  const uint32_t escape = (1u << best.bits) - 1;
  std::byte* codebook = out + 4;
  std::byte* codes = codebook + best.codebook;
  const uint64_t code_bytes = (uint64_t{words} * best.bits + 7) / 8;
  std::byte* escapes = codes + code_bytes;
  for (uint32_t c = 0; c < best.codebook; ++c) codebook[c] = std::byte{order[c]};
  std::memset(codes, 0, code_bytes);
  uint32_t n_escapes = 0;
  for (uint32_t i = 0; i < words; ++i) {
    const uint8_t s = symbol_of(w[i]);
    uint32_t c = code[s] >= 0 ? static_cast<uint32_t>(code[s]) : escape;
    if (code[s] < 0) escapes[n_escapes++] = std::byte{s};
    const uint64_t bit = uint64_t{i} * best.bits;
    const uint32_t v = c << (bit & 7);
    codes[bit >> 3] |= std::byte(v & 0xff);
    if ((v >> 8) != 0) codes[(bit >> 3) + 1] |= std::byte(v >> 8);
  }
  std::byte* rest = escapes + n_escapes;
  for (uint32_t i = 0; i < words; ++i) rest[i] = std::byte{rest_of(w[i])};
  put<uint32_t>(out, n_escapes);
  return best;
}

/// The host's serial decode of one block, through the same steps as the CUDA decoder's
/// (split16_format.hpp), refusing what the kernel flags.
Status decode_block(const Entry& e, const std::byte* in, uint16_t* w) {
  if (e.mode == kRaw) {
    std::memcpy(w, in, size_t{e.words} * 2);
    return {};
  }
  Split16Coded c;
  if (!split16_coded_parts(e, reinterpret_cast<const uint8_t*>(in), c)) {
    return corrupt("a coded block whose size does not match its escapes");
  }
  uint32_t used = 0;
  for (uint32_t i = 0; i < e.words; ++i) {
    const uint32_t code = split16_code_at(c, i, e.bits);
    uint8_t s;
    if (code == c.escape) {
      if (used == c.escapes) return corrupt("more escape codes than escapes");
      s = c.escaped[used++];
    } else if (code < e.codebook) {
      s = c.codebook[code];
    } else {
      return corrupt("a code outside its block's codebook");
    }
    w[i] = split16_word(s, c.rest[i]);
  }
  if (used != c.escapes) return corrupt("fewer escape codes than escapes");
  return {};
}

bool all_zero(const std::byte* at, size_t n) {
  return std::all_of(at, at + n, [](std::byte b) { return b == std::byte{0}; });
}

Status check_entry(const Entry& e) {
  if (e.mode == kRaw) {
    return e.bytes == uint64_t{e.words} * 2 ? Status{} : corrupt("a raw block of the wrong size");
  }
  if (e.mode != kCoded || e.bits == 0 || e.bits > kMaxBits || e.codebook >= (1u << e.bits)) {
    return corrupt("a block with an unknown mode, width or codebook");
  }
  if (e.bytes < split16_coded_bytes(e.words, e.bits, e.codebook, 0) ||
      e.bytes > split16_coded_bytes(e.words, e.bits, e.codebook, e.words)) {
    return corrupt("a coded block whose size no count of escapes gives");
  }
  return {};
}

}  // namespace

size_t split16_bound(size_t raw_bytes) {
  if (raw_bytes > kSplit16MaxBytes) return SIZE_MAX;
  return split16_head_bytes(raw_bytes) + raw_bytes;
}

Result<size_t> split16_encode(std::span<const std::byte> raw, std::span<std::byte> out) {
  if (raw.size() > kSplit16MaxBytes) {
    return Failure(
        Status(ErrorCode::kInvalidArgument, "split16: a payload past the format's size"));
  }
  if (out.size() < split16_bound(raw.size())) {
    return Failure(Status(ErrorCode::kInvalidArgument, "split16: output smaller than the bound"));
  }
  const uint64_t words = raw.size() / 2;
  const auto blocks = static_cast<uint32_t>(split16_blocks(raw.size()));
  std::byte* h = out.data();
  std::memset(h, 0, kHeaderBytes);
  put<uint32_t>(h, kSplit16Magic);
  put<uint32_t>(h + 4, kSplit16Version);
  put<uint64_t>(h + 8, raw.size());
  put<uint32_t>(h + 16, kSplit16BlockWords);
  put<uint32_t>(h + 20, blocks);
  if (raw.size() % 2 != 0) put<uint8_t>(h + 24, std::to_integer<uint8_t>(raw.back()));
  std::byte* table = h + kHeaderBytes;
  std::byte* data = table + size_t{blocks} * kEntryBytes;
  std::vector<uint16_t> w(kSplit16BlockWords);
  uint64_t offset = 0;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint64_t first = uint64_t{b} * kSplit16BlockWords;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kSplit16BlockWords, words - first));
    std::memcpy(w.data(), raw.data() + first * 2, size_t{n} * 2);
    Entry e = encode_block(w.data(), n, data + offset);
    std::byte* at = table + size_t{b} * kEntryBytes;
    std::memset(at, 0, kEntryBytes);
    put<uint64_t>(at, offset);
    put<uint32_t>(at + 8, e.bytes);
    put<uint8_t>(at + 12, e.mode);
    put<uint8_t>(at + 13, e.bits);
    put<uint8_t>(at + 14, e.codebook);
    offset += e.bytes;
  }
  put<uint64_t>(h + 32, table_checksum(h, table, size_t{blocks} * kEntryBytes));
  return kHeaderBytes + size_t{blocks} * kEntryBytes + offset;
}

Result<Split16Table> split16_table(std::span<const std::byte> s, bool header_only) {
  if (s.size() < kHeaderBytes) return Failure(corrupt("shorter than its header"));
  const std::byte* h = s.data();
  if (get<uint32_t>(h) != kSplit16Magic) return Failure(corrupt("not a split16 stream (magic)"));
  if (get<uint32_t>(h + 4) != kSplit16Version) return Failure(corrupt("unknown version"));
  Split16Table t;
  t.decoded_bytes = get<uint64_t>(h + 8);
  t.tail = get<uint8_t>(h + 24);
  const uint32_t block_words = get<uint32_t>(h + 16);
  const uint32_t blocks = get<uint32_t>(h + 20);
  if (block_words != kSplit16BlockWords) return Failure(corrupt("unknown block size"));
  if (!all_zero(h + 25, 7) || (t.decoded_bytes % 2 == 0 && t.tail != 0)) {
    return Failure(corrupt("a header field that must be zero is not"));
  }
  const uint64_t words = t.decoded_bytes / 2;
  if (blocks != split16_blocks(t.decoded_bytes)) {
    return Failure(corrupt("a block count that does not match the decoded size"));
  }
  const uint64_t table = uint64_t{blocks} * kEntryBytes;
  if (table > s.size() - kHeaderBytes) return Failure(corrupt("a table past the stream's end"));
  const std::byte* at = h + kHeaderBytes;
  if (get<uint64_t>(h + 32) != table_checksum(h, at, table)) {
    return Failure(corrupt("header or block table checksum mismatch"));
  }
  t.data_offset = kHeaderBytes + table;
  uint64_t next = 0;
  for (uint32_t b = 0; b < blocks; ++b, at += kEntryBytes) {
    const Entry e = split16_entry(reinterpret_cast<const uint8_t*>(at), b, words);
    if (e.offset != next) return Failure(corrupt("blocks out of order"));
    if (get<uint8_t>(at + 15) != 0) {
      return Failure(corrupt("a table entry's zero byte is not zero")
                         .with_context("block " + std::to_string(b)));
    }
    if (Status c = check_entry(e); !c.ok())
      return Failure(c.with_context("block " + std::to_string(b)));
    next = e.offset + e.bytes;
    t.blocks.push_back(e);
  }
  t.stored_bytes = t.data_offset + next;
  if (!header_only && t.stored_bytes != s.size()) {
    return Failure(corrupt("a stream whose size is not its blocks' sum"));
  }
  return t;
}

Result<uint64_t> split16_decoded_bytes(std::span<const std::byte> stored) {
  auto t = split16_table(stored);
  if (!t) return Failure(t.error());
  return t->decoded_bytes;
}

Status split16_decode(std::span<const std::byte> stored, std::span<std::byte> raw) {
  auto t = split16_table(stored);
  if (!t) return t.error();
  if (raw.size() != t->decoded_bytes) {
    return {ErrorCode::kInvalidArgument, "split16: output size differs from the decoded size"};
  }
  std::vector<uint16_t> w(kSplit16BlockWords);
  for (size_t b = 0; b < t->blocks.size(); ++b) {
    const Entry& e = t->blocks[b];
    Status s = decode_block(e, stored.data() + t->data_offset + e.offset, w.data());
    if (!s.ok()) return s.with_context("block " + std::to_string(b));
    std::memcpy(raw.data() + e.out_offset, w.data(), size_t{e.words} * 2);
  }
  if (raw.size() % 2 != 0) raw.back() = std::byte{t->tail};
  return {};
}

}  // namespace kvtier::codec
