// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/checksum.hpp"

#include <cstring>

namespace kvtier::kvsum {
namespace {

inline uint64_t load_word(const std::byte* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}

// The zero-padded last word of a range whose length is not a multiple of 8.
inline uint64_t tail_word(const std::byte* p, size_t n) {
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  return w;
}

}  // namespace

uint64_t partial(const std::byte* data, size_t bytes, uint64_t first_word) {
  const size_t words = bytes / 8;
  // Four independent accumulators keep both multipliers busy; the sum is order-independent.
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= words; i += 4) {
    const std::byte* p = data + i * 8;
    s0 += term(load_word(p), first_word + i);
    s1 += term(load_word(p + 8), first_word + i + 1);
    s2 += term(load_word(p + 16), first_word + i + 2);
    s3 += term(load_word(p + 24), first_word + i + 3);
  }
  for (; i < words; ++i) s0 += term(load_word(data + i * 8), first_word + i);
  if (bytes % 8 != 0) s0 += term(tail_word(data + words * 8, bytes % 8), first_word + words);
  return s0 + s1 + s2 + s3;
}

uint64_t copy_partial(std::byte* dst, const std::byte* src, size_t bytes, uint64_t first_word) {
  // Copy in L2-sized slices and sum each while it is still in cache: one pass over memory.
  constexpr size_t kSlice = 64 * 1024;
  uint64_t sum = 0;
  for (size_t done = 0; done < bytes; done += kSlice) {
    size_t n = bytes - done < kSlice ? bytes - done : kSlice;
    std::memcpy(dst + done, src + done, n);
    sum += partial(dst + done, n, first_word + done / 8);
  }
  return sum;
}

}  // namespace kvtier::kvsum
