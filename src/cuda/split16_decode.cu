// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <cuda_runtime.h>

#include "cuda/split16_decode.hpp"

namespace kvtier::cuda {
namespace {

using codec::Split16Block;

constexpr int kThreads = codec::kSplit16Threads;

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

// The steps are codec/split16_format.hpp's, which the unit test runs serially against the host
// decoder; every return below is taken by the whole thread block at once, so no thread is left
// at a barrier.
__global__ void __launch_bounds__(kThreads)
    split16_decode_kernel(const Split16Block* blocks, const uint8_t* data, uint8_t* out,
                          unsigned int* bad) {
  const Split16Block b = blocks[blockIdx.x];
  const uint8_t* in = data + b.offset;
  uint16_t* words = reinterpret_cast<uint16_t*>(out + b.out_offset);
  if (b.mode == codec::kSplit16Raw) {
    for (uint32_t i = threadIdx.x; i < b.words; i += kThreads) {
      words[i] = codec::split16_raw_word(in, i);
    }
    return;
  }
  __shared__ uint8_t book[128];
  __shared__ uint32_t scratch[kThreads];
  codec::Split16Coded c;
  if (!codec::split16_coded_parts(b, in, c)) {  // same answer in every thread
    if (threadIdx.x == 0) atomicOr(bad, 1u);
    return;
  }
  for (uint32_t i = threadIdx.x; i < b.codebook; i += kThreads) book[i] = c.codebook[i];
  const uint32_t first = threadIdx.x * codec::kSplit16WordsPerThread;
  bool wrong = false;
  const uint32_t mine =
      codec::split16_share_escapes(b, c, first, codec::kSplit16WordsPerThread, wrong);
  const uint32_t through = block_inclusive_sum(mine, scratch);
  const uint32_t total = scratch[kThreads - 1];
  // One thread's wrong code refuses the whole block: none of its words is written.
  const bool any_wrong = __syncthreads_or(wrong) != 0;
  if (total != c.escapes || any_wrong) {
    if (threadIdx.x == 0) atomicOr(bad, 1u);
    return;
  }
  codec::split16_share_decode(b, c, book, first, codec::kSplit16WordsPerThread, through - mine,
                              words);
}

/// Entry i of the table at `entries` as a block, one thread an entry; the first also writes an odd
/// payload's last byte (the header's tail).
__global__ void split16_table_kernel(const uint8_t* stream, uint32_t count, uint64_t decoded_bytes,
                                     Split16Block* table, uint8_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0 && decoded_bytes % 2 != 0) out[decoded_bytes - 1] = stream[24];
  if (i >= count) return;
  table[i] = codec::split16_entry(
      stream + codec::kSplit16HeaderBytes + i * codec::kSplit16EntryBytes, i, decoded_bytes / 2);
}

}  // namespace

int launch_split16_decode_stream(const uint8_t* stream, uint32_t blocks, uint64_t decoded_bytes,
                                 Split16Block* table, uint8_t* out, unsigned int* bad,
                                 Stream cuda_stream) {
  auto s = static_cast<cudaStream_t>(cuda_stream);
  const uint32_t threads = 256;
  split16_table_kernel<<<(blocks + threads - 1) / threads + (blocks == 0 ? 1 : 0), threads, 0, s>>>(
      stream, blocks, decoded_bytes, table, out);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return static_cast<int>(e);
  const uint64_t data = codec::kSplit16HeaderBytes + uint64_t{blocks} * codec::kSplit16EntryBytes;
  return launch_split16_decode(table, blocks, stream + data, out, bad, cuda_stream);
}

int launch_split16_decode(const Split16Block* blocks, uint32_t count, const uint8_t* data,
                          uint8_t* out, unsigned int* bad, Stream stream) {
  if (count == 0) return cudaSuccess;
  split16_decode_kernel<<<count, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(blocks, data,
                                                                                   out, bad);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::cuda
