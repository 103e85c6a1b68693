// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The split16 stream's layout (split16.hpp), shared by the host codec and the CUDA decoder (plain
// C++17, no library types, so nvcc compiles it too).
//
// Stream:  header (40) | block table (16 a block) | block data, back to back. Every field and every
//          16-bit word (the payload's bytes 2i, 2i+1) is little-endian.
// Header:  0 magic "KS16" (u32) | 4 version 1 (u32) | 8 decoded bytes (u64) | 16 words per block
//          (u32) | 20 blocks (u32) | 24 the last byte of an odd-sized payload (u8) | 25..31 zero |
//          32 table checksum (u64: XXH3-64 of the table, seeded with XXH3-64 of bytes 0..31).
//          Blocks: ceil(decoded bytes / 2 / words per block); the tail byte is zero for an even
//          payload. Zero fields must be zero (a decoder refuses the stream otherwise).
// Entry:   0 block offset from the first block (u64) | 8 stored bytes (u32) | 12 mode (u8: 0 raw,
//          1 coded) | 13 code bits (u8, 1..7) | 14 codebook symbols (u8, < 2^bits) | 15 zero.
// Coded block: escapes (u32) | codebook (symbols) | codes (words x bits, LSB first, rounded up to
//          a byte) | escaped symbols in order | rest bytes (one a word). Raw block: the words.
// A word w is symbol (w >> 7) & 0xff and rest (sign bit 15 as bit 7, bits 6..0).
#pragma once

#include <cstdint>

namespace kvtier::codec {

inline constexpr uint32_t kSplit16Magic = 0x3631534b;  // "KS16"
inline constexpr uint32_t kSplit16Version = 1;
inline constexpr uint32_t kSplit16BlockWords = 4096;
inline constexpr uint64_t kSplit16HeaderBytes = 40;
inline constexpr uint64_t kSplit16EntryBytes = 16;
inline constexpr uint8_t kSplit16Raw = 0;
inline constexpr uint8_t kSplit16Coded = 1;
inline constexpr uint32_t kSplit16MaxBits = 7;
/// The largest payload a stream holds: the block count is a u32.
inline constexpr uint64_t kSplit16MaxBytes = uint64_t{0xffffffffu} * kSplit16BlockWords * 2 + 1;

/// Blocks of a stream of a payload of `decoded_bytes` (its whole words; an odd last byte is the
/// header's tail).
constexpr uint64_t split16_blocks(uint64_t decoded_bytes) {
  return (decoded_bytes / 2 + kSplit16BlockWords - 1) / kSplit16BlockWords;
}

/// A stream's header and table: the bytes a decoder needs before any block (a GPU decoder's, from
/// the host).
constexpr uint64_t split16_head_bytes(uint64_t decoded_bytes) {
  return kSplit16HeaderBytes + split16_blocks(decoded_bytes) * kSplit16EntryBytes;
}

constexpr uint64_t split16_code_bytes(uint32_t words, uint32_t bits) {
  return (uint64_t{words} * bits + 7) / 8;
}

/// Threads of a parallel block decoder (the CUDA decoder's thread block); thread t decodes words
/// [t * kSplit16WordsPerThread, + kSplit16WordsPerThread) of its block.
inline constexpr uint32_t kSplit16Threads = 256;
inline constexpr uint32_t kSplit16WordsPerThread = kSplit16BlockWords / kSplit16Threads;
static_assert(kSplit16WordsPerThread * kSplit16Threads == kSplit16BlockWords);

/// Stored bytes of a coded block.
constexpr uint64_t split16_coded_bytes(uint32_t words, uint32_t bits, uint32_t codebook,
                                       uint64_t escapes) {
  return 4 + codebook + split16_code_bytes(words, bits) + escapes + words;
}

constexpr uint16_t split16_word(uint32_t symbol, uint32_t rest) {
  return static_cast<uint16_t>(((rest & 0x80u) << 8) | ((symbol & 0xffu) << 7) | (rest & 0x7fu));
}

/// Word `i` of a raw block's data.
constexpr uint16_t split16_raw_word(const uint8_t* in, uint32_t i) {
  return static_cast<uint16_t>(in[2 * uint64_t{i}] | (in[2 * uint64_t{i} + 1] << 8));
}

/// One block of a checked table: where its stored bytes are, how they are coded, where its words
/// go.
struct Split16Block {
  uint64_t offset = 0;      ///< from the stream's first block
  uint64_t out_offset = 0;  ///< byte offset of its first word in the decoded payload
  uint32_t bytes = 0;
  uint32_t words = 0;
  uint8_t mode = kSplit16Raw;
  uint8_t bits = 0;
  uint8_t codebook = 0;
};

/// Little-endian field of `n` bytes at `at`.
constexpr uint64_t split16_le(const uint8_t* at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | at[i];
  return v;
}

/// Entry `b` of a stream's table (`entry`, its 16 bytes) of a payload of `words` whole words, as a
/// block: the host's table check and the GPU's decoder read entries through this one function.
constexpr Split16Block split16_entry(const uint8_t* entry, uint32_t b, uint64_t words) {
  const uint64_t first = uint64_t{b} * kSplit16BlockWords;
  Split16Block e;
  e.offset = split16_le(entry, 8);
  e.out_offset = first * 2;
  e.bytes = static_cast<uint32_t>(split16_le(entry + 8, 4));
  e.words = static_cast<uint32_t>(words - first < kSplit16BlockWords ? words - first
                                                                     : kSplit16BlockWords);
  e.mode = entry[12];
  e.bits = entry[13];
  e.codebook = entry[14];
  return e;
}

// The steps of a parallel decode of one coded block, shared by the CUDA decoder (each thread runs
// them on its share, with a block-wide scan and barriers between) and the unit test that runs
// them serially against the host decoder.

/// Where a coded block's parts lie in its data `in`.
struct Split16Coded {
  const uint8_t* codebook = nullptr;
  const uint8_t* codes = nullptr;
  const uint8_t* escaped = nullptr;
  const uint8_t* rest = nullptr;
  uint64_t code_bytes = 0;
  uint32_t escapes = 0;
  uint32_t escape = 0;  ///< the escape code, also the mask of a code
};

/// Finds the parts of coded block `b` (an entry of a checked table, so its `bytes` lie in `in`);
/// false when its escape count contradicts the entry.
constexpr bool split16_coded_parts(const Split16Block& b, const uint8_t* in, Split16Coded& c) {
  c.escapes =
      uint32_t{in[0]} | (uint32_t{in[1]} << 8) | (uint32_t{in[2]} << 16) | (uint32_t{in[3]} << 24);
  if (c.escapes > b.words ||
      b.bytes != split16_coded_bytes(b.words, b.bits, b.codebook, c.escapes)) {
    return false;
  }
  c.codebook = in + 4;
  c.codes = c.codebook + b.codebook;
  c.code_bytes = split16_code_bytes(b.words, b.bits);
  c.escaped = c.codes + c.code_bytes;
  c.rest = c.escaped + c.escapes;
  c.escape = (1u << b.bits) - 1;
  return true;
}

/// Code `i` of a block coded `bits` wide (LSB first; a code spans at most two bytes).
constexpr uint32_t split16_code_at(const Split16Coded& c, uint32_t i, uint32_t bits) {
  const uint64_t bit = uint64_t{i} * bits;
  const uint64_t at = bit >> 3;
  uint32_t v = c.codes[at];
  if (at + 1 < c.code_bytes) v |= uint32_t{c.codes[at + 1]} << 8;
  return (v >> (bit & 7)) & c.escape;
}

/// Step 1 of a share, words [first, first + n) cut at the block's end: its escape codes; `wrong`
/// is set when a code is neither an escape nor in the codebook.
constexpr uint32_t split16_share_escapes(const Split16Block& b, const Split16Coded& c,
                                         uint32_t first, uint32_t n, bool& wrong) {
  uint32_t escapes = 0;
  for (uint32_t i = first; i < first + n && i < b.words; ++i) {
    const uint32_t code = split16_code_at(c, i, b.bits);
    escapes += code == c.escape ? 1 : 0;
    wrong |= code != c.escape && code >= b.codebook;
  }
  return escapes;
}

/// Step 2, once every share's escapes are known to add up to the block's and no code is wrong:
/// decodes the share into `words` (the block's first word), its first escape being escape
/// `next` of the block; `book` holds the codebook.
constexpr void split16_share_decode(const Split16Block& b, const Split16Coded& c,
                                    const uint8_t* book, uint32_t first, uint32_t n, uint32_t next,
                                    uint16_t* words) {
  for (uint32_t i = first; i < first + n && i < b.words; ++i) {
    const uint32_t code = split16_code_at(c, i, b.bits);
    const uint32_t symbol = code == c.escape ? c.escaped[next++] : book[code];
    words[i] = split16_word(symbol, c.rest[i]);
  }
}

}  // namespace kvtier::codec
