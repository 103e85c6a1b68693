// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// kvsum64: the payload checksum. Defined in docs/format.md ("Payload checksum").
//
// Why not xxHash for payloads: xxHash folds its input sequentially, so a GPU would have to hash
// per block and combine, and a restore piece could not be checked until its whole record arrived.
// kvsum64 is a sum of independently mixed words: any range of words can be summed on its own, in
// any order, on host or device, and the partial sums add up to the same value bit for bit.
// A change confined to one 8-byte word always changes the sum (the mixer is a bijection); other
// corruption goes undetected with probability about 2^-64. It is an integrity check, not a MAC.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvtier::kvsum {

inline constexpr uint64_t kPositionKey = 0x9e3779b97f4a7c15ULL;
inline constexpr uint64_t kLengthKey = 0xd6e8feb86659fd93ULL;

/// The 64-bit finalizer of MurmurHash3: a bijection on 64-bit words with full avalanche.
constexpr uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

/// Contribution of little-endian word `w` at word index `i` of the payload.
constexpr uint64_t term(uint64_t w, uint64_t i) { return mix(w ^ ((i + 1) * kPositionKey)); }

/// Sum of the terms of the bytes [0, bytes) of `data`, which starts at word `first_word` of the
/// payload. `bytes` must be a multiple of 8 unless this range ends the payload (the last word is
/// then zero-padded).
uint64_t partial(const std::byte* data, size_t bytes, uint64_t first_word);

/// Like partial(), and copies the bytes to `dst` in the same pass.
uint64_t copy_partial(std::byte* dst, const std::byte* src, size_t bytes, uint64_t first_word);

/// The checksum of a payload of `total_bytes` whose terms add up to `sum`.
constexpr uint64_t finish(uint64_t sum, uint64_t total_bytes) {
  return mix(sum ^ mix(total_bytes * kLengthKey + 1));
}

/// Checksum of a whole payload held in one buffer.
inline uint64_t of(const std::byte* data, size_t bytes) {
  return finish(partial(data, bytes, 0), bytes);
}

}  // namespace kvtier::kvsum
