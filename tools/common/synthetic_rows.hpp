// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The synthetic KV generator's arithmetic, shared by the host generator and the CUDA prefill
// stand-in so both produce the same bytes: word i of the row of token `token` at `position` in
// (K|V, layer) block `block` (= kv * layers + layer) is row_word(row_seed(token, position, block),
// i).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KVTIER_SYNTH_FN __host__ __device__ __forceinline__
#else
#define KVTIER_SYNTH_FN inline
#endif

namespace kvtier::synthetic {

KVTIER_SYNTH_FN constexpr uint64_t mix64(uint64_t k) {
  k ^= k >> 31;
  k *= 0x7fb5d329728ea185ULL;
  k ^= k >> 27;
  k *= 0x81dadef4bc2dd44dULL;
  k ^= k >> 33;
  return k;
}

KVTIER_SYNTH_FN constexpr uint64_t row_seed(int32_t token, uint64_t position, uint64_t block) {
  return mix64(static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x9e3779b97f4a7c15ULL ^
               mix64(position + 1) ^ (block << 48));
}

KVTIER_SYNTH_FN constexpr uint64_t row_word(uint64_t seed, uint64_t word) {
  return mix64(seed + word);
}

/// A row word made as compressible as a model's bf16 KV (`kvtier bench --kv bf16-like`): each of
/// its four 16-bit lanes keeps its sign and mantissa bits and takes one of four exponents, chosen
/// by its own low bits, so split16 codes its exponents in two bits. Synthetic: not a model's KV.
KVTIER_SYNTH_FN constexpr uint16_t bf16_like_lane(uint16_t w) {
  const uint32_t exponent = 0x7c + (w & 3u);  // bits 14..7 of the word
  return static_cast<uint16_t>((w & 0x8000u) | (exponent << 7) | (w & 0x7fu));
}

KVTIER_SYNTH_FN constexpr uint64_t bf16_like_word(uint64_t v) {
  uint64_t out = 0;
  for (int lane = 0; lane < 4; ++lane) {
    const auto w = static_cast<uint16_t>(v >> (16 * lane));
    out |= uint64_t{bf16_like_lane(w)} << (16 * lane);
  }
  return out;
}

/// Word `word` of a row: the random synthetic word, or its bf16-like form.
KVTIER_SYNTH_FN constexpr uint64_t kv_word(uint64_t seed, uint64_t word, bool bf16_like) {
  const uint64_t v = row_word(seed, word);
  return bf16_like ? bf16_like_word(v) : v;
}

}  // namespace kvtier::synthetic
