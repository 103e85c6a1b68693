// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A CPU run of the CUDA split16 decoder, shared by the unit test and the fuzzer.
#pragma once

#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "codec/split16.hpp"

namespace kvtier::codec {

// The CUDA decoder's work for one block (src/cuda/split16_decode.cu), run on the CPU: its thread
// count and shares, its steps (split16_format.hpp), its block-wide scan done serially and its
// refusals at the same points. Not a GPU run: it checks the parallel indexing, not the device.
// Returns false where the kernel flags the block; then no word is written.
inline bool emulate_kernel_block(const Split16Block& b, const uint8_t* in, uint16_t* words) {
  if (b.mode == kSplit16Raw) {
    for (uint32_t t = 0; t < kSplit16Threads; ++t) {
      for (uint32_t i = t; i < b.words; i += kSplit16Threads) words[i] = split16_raw_word(in, i);
    }
    return true;
  }
  Split16Coded c;
  if (!split16_coded_parts(b, in, c)) return false;
  std::array<uint8_t, 128> book{};
  for (uint32_t i = 0; i < b.codebook; ++i) book[i] = c.codebook[i];
  std::array<uint32_t, kSplit16Threads> mine{}, before{};
  bool any_wrong = false;
  for (uint32_t t = 0; t < kSplit16Threads; ++t) {
    bool wrong = false;
    mine[t] =
        split16_share_escapes(b, c, t * kSplit16WordsPerThread, kSplit16WordsPerThread, wrong);
    any_wrong |= wrong;
  }
  uint32_t total = 0;
  for (uint32_t t = 0; t < kSplit16Threads; ++t) {
    before[t] = total;
    total += mine[t];
  }
  if (total != c.escapes || any_wrong) return false;
  for (uint32_t t = 0; t < kSplit16Threads; ++t) {
    split16_share_decode(b, c, book.data(), t * kSplit16WordsPerThread, kSplit16WordsPerThread,
                         before[t], words);
  }
  return true;
}

/// Every block of `stored` (a stream whose table checks) through the emulated kernel, into a
/// payload pre-filled with 0xEE; returns it and which blocks were flagged (none: a bad table).
inline std::pair<std::vector<std::byte>, std::vector<bool>> emulate_kernel(
    const std::vector<std::byte>& stored) {
  auto t = split16_table(stored);
  if (!t) return {};
  std::vector<std::byte> out(t->decoded_bytes, std::byte{0xEE});
  std::vector<uint16_t> words(t->decoded_bytes / 2, 0xEEEE);
  std::vector<bool> flagged;
  const auto* data = reinterpret_cast<const uint8_t*>(stored.data() + t->data_offset);
  for (const Split16Block& b : t->blocks) {
    flagged.push_back(!emulate_kernel_block(b, data + b.offset, words.data() + b.out_offset / 2));
  }
  std::memcpy(out.data(), words.data(), words.size() * 2);
  if (out.size() % 2) out.back() = std::byte{t->tail};
  return {out, flagged};
}

}  // namespace kvtier::codec
