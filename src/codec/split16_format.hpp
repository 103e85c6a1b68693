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

}  // namespace kvtier::codec
