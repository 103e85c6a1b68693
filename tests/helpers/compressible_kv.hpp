// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Synthetic KV made compressible, for the tests of coded records (Options::compression).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace kvtier::testing {

/// Makes random KV words (synthetic::fill_kv's) as compressible as a model's bf16 KV: each 16-bit
/// word keeps its sign and mantissa bits and gets one of four exponents (chosen by its own low
/// bits), so split16 codes its exponents in two bits and its records are kept coded.
inline void bf16_like(std::span<std::byte> kv) {
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    const auto lo = static_cast<uint32_t>(kv[i]);
    const auto hi = static_cast<uint32_t>(kv[i + 1]);
    const uint32_t exponent = 0x7c + (lo & 3);  // bits 14..7 of the word
    const uint32_t word = ((hi & 0x80) << 8) | (exponent << 7) | (lo & 0x7f);
    kv[i] = static_cast<std::byte>(word & 0xff);
    kv[i + 1] = static_cast<std::byte>(word >> 8);
  }
}

}  // namespace kvtier::testing
