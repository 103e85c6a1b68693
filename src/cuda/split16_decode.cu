// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <cuda_runtime.h>

#include "cuda/split16_decode.hpp"

namespace kvtier::cuda {
namespace {

using codec::kSplit16BlockWords;
using codec::Split16Block;

constexpr int kThreads = 256;
constexpr int kWordsPerThread = kSplit16BlockWords / kThreads;
static_assert(kWordsPerThread * kThreads == kSplit16BlockWords);

__device__ __forceinline__ uint32_t code_at(const uint8_t* codes, uint64_t code_bytes, uint32_t i,
                                            uint32_t bits, uint32_t mask) {
  const uint64_t bit = uint64_t{i} * bits;
  const uint64_t at = bit >> 3;
  uint32_t v = codes[at];
  if (at + 1 < code_bytes) v |= uint32_t{codes[at + 1]} << 8;
  return (v >> (bit & 7)) & mask;
}

/// Inclusive sum over the thread block (Hillis-Steele over shared memory; every thread calls it).
__device__ uint32_t block_inclusive_sum(uint32_t v, uint32_t* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int offset = 1; offset < kThreads; offset *= 2) {
    const uint32_t add = threadIdx.x >= offset ? scratch[threadIdx.x - offset] : 0;
    __syncthreads();
    scratch[threadIdx.x] += add;
    __syncthreads();
  }
  return scratch[threadIdx.x];
}

__global__ void __launch_bounds__(kThreads)
    split16_decode_kernel(const Split16Block* blocks, const uint8_t* data, uint8_t* out,
                          unsigned int* bad) {
  const Split16Block b = blocks[blockIdx.x];
  const uint8_t* in = data + b.offset;
  uint16_t* words = reinterpret_cast<uint16_t*>(out + b.out_offset);
  if (b.mode == codec::kSplit16Raw) {
    for (uint32_t i = threadIdx.x; i < b.words; i += kThreads) {
      words[i] = static_cast<uint16_t>(in[2 * i] | (in[2 * i + 1] << 8));
    }
    return;
  }
  __shared__ uint8_t book[128];
  __shared__ uint32_t scratch[kThreads];
  const uint32_t escapes = in[0] | (in[1] << 8) | (in[2] << 16) | (uint32_t{in[3]} << 24);
  // Same answer in every thread: the whole block leaves together, before any barrier.
  if (escapes > b.words ||
      b.bytes != codec::split16_coded_bytes(b.words, b.bits, b.codebook, escapes)) {
    if (threadIdx.x == 0) atomicOr(bad, 1u);
    return;
  }
  for (uint32_t i = threadIdx.x; i < b.codebook; i += kThreads) book[i] = in[4 + i];
  const uint8_t* codes = in + 4 + b.codebook;
  const uint64_t code_bytes = codec::split16_code_bytes(b.words, b.bits);
  const uint8_t* escaped = codes + code_bytes;
  const uint8_t* rest = escaped + escapes;
  const uint32_t escape = (1u << b.bits) - 1;
  const uint32_t first = threadIdx.x * kWordsPerThread;
  uint32_t mine = 0;
  bool wrong = false;
  for (int k = 0; k < kWordsPerThread; ++k) {
    if (first + k >= b.words) break;
    const uint32_t c = code_at(codes, code_bytes, first + k, b.bits, escape);
    mine += c == escape ? 1 : 0;
    wrong |= c != escape && c >= b.codebook;
  }
  const uint32_t through = block_inclusive_sum(mine, scratch);
  const uint32_t total = scratch[kThreads - 1];
  if (total != escapes || wrong) {
    atomicOr(bad, 1u);
    if (total != escapes) return;
  }
  if (wrong) return;
  uint32_t next = through - mine;
  for (int k = 0; k < kWordsPerThread; ++k) {
    const uint32_t i = first + k;
    if (i >= b.words) break;
    const uint32_t c = code_at(codes, code_bytes, i, b.bits, escape);
    const uint32_t symbol = c == escape ? escaped[next++] : book[c];
    words[i] = codec::split16_word(symbol, rest[i]);
  }
}

}  // namespace

int launch_split16_decode(const Split16Block* blocks, uint32_t count, const uint8_t* data,
                          uint8_t* out, unsigned int* bad, Stream stream) {
  if (count == 0) return cudaSuccess;
  split16_decode_kernel<<<count, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(blocks, data,
                                                                                   out, bad);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::cuda
