// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/checksum.hpp"

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

// A plain loop the compiler vectorizes; with AVX-512DQ (x86-64-v4) the 64-bit multiplies become
// vpmullq, one instruction per eight words instead of a scalar multiply each (bench/micro: BM_Kvsum
// measures it). The clones are
// picked at load time, so one binary runs on every x86-64. (Not under TSan: its runtime is not up
// when ifunc resolvers run, and the process dies before main.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define KVTIER_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KVTIER_VECTOR_CLONES
#endif

KVTIER_VECTOR_CLONES
uint64_t partial(const std::byte* data, size_t bytes, uint64_t first_word) {
  const size_t words = bytes / 8;
  uint64_t sum = 0;
  for (size_t i = 0; i < words; ++i) sum += term(load_word(data + i * 8), first_word + i);
  if (bytes % 8 != 0) sum += term(tail_word(data + words * 8, bytes % 8), first_word + words);
  return sum;
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
