// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// KV scatter/gather between device staging and the caller's KV memory in any layout, with the
// kvsum64 checksum computed where the data lands. The checksum and layout formulas are the host's
// own (store/checksum.hpp, device/kv_layout.hpp), compiled for the device: bit-identical by
// construction.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/kernels.hpp"
#include "store/checksum.hpp"

namespace kvtier::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ unsigned long long block_sum(unsigned long long v) {
  __shared__ unsigned long long warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  unsigned long long total = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  }
  return total;
}

__device__ __forceinline__ unsigned long long terms_of(const uint4& v, uint64_t word) {
  const uint64_t w0 = (static_cast<uint64_t>(v.y) << 32) | v.x;
  const uint64_t w1 = (static_cast<uint64_t>(v.w) << 32) | v.z;
  return kvsum::term(w0, word) + kvsum::term(w1, word + 1);
}

__global__ void scatter_kernel(const uint8_t* __restrict__ src, PieceSpan span, KvLayoutParams p,
                               unsigned long long* sums) {
  const uint64_t vectors = span.bytes / 16;
  unsigned long long acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < vectors;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t q = span.payload_offset + i * 16;
    const uint4 v = *reinterpret_cast<const uint4*>(src + i * 16);
    const PayloadPos pos = payload_pos(p, span.token_count, q);
    *reinterpret_cast<uint4*>(kv_address(p, pos.kv, pos.layer, span.first_token + pos.token, pos.col)) = v;
    acc += terms_of(v, q / 8);
  }
  const unsigned long long total = block_sum(acc);
  if (threadIdx.x == 0 && total != 0) atomicAdd(&sums[span.record], total);
}

__global__ void gather_kernel(uint8_t* __restrict__ dst, PieceSpan span, KvLayoutParams p) {
  const uint64_t vectors = span.bytes / 16;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < vectors;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t q = span.payload_offset + i * 16;
    const PayloadPos pos = payload_pos(p, span.token_count, q);
    *reinterpret_cast<uint4*>(dst + i * 16) =
        *reinterpret_cast<const uint4*>(kv_address(p, pos.kv, pos.layer, span.first_token + pos.token, pos.col));
  }
}

__global__ void record_sum_kernel(uint64_t first_token, uint32_t count, KvLayoutParams p, unsigned long long* sum) {
  const uint64_t vectors = 2 * uint64_t{p.layers} * count * p.row_bytes / 16;
  unsigned long long acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < vectors;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t q = i * 16;
    const PayloadPos pos = payload_pos(p, count, q);
    const uint4 v = *reinterpret_cast<const uint4*>(kv_address(p, pos.kv, pos.layer, first_token + pos.token, pos.col));
    acc += terms_of(v, q / 8);
  }
  const unsigned long long total = block_sum(acc);
  if (threadIdx.x == 0 && total != 0) atomicAdd(sum, total);
}

__global__ void copy_sum_kernel(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src, uint64_t bytes,
                                uint64_t first_word, unsigned long long* sum) {
  const uint64_t vectors = bytes / 16;
  unsigned long long acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < vectors;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = reinterpret_cast<const uint4*>(src)[i];
    reinterpret_cast<uint4*>(dst)[i] = v;
    acc += terms_of(v, first_word + 2 * i);
  }
  const unsigned long long total = block_sum(acc);
  if (threadIdx.x == 0 && total != 0) atomicAdd(sum, total);
}

// Enough blocks to fill the GPU several times over; the grid-stride loops take the rest.
unsigned blocks_for(uint64_t bytes) {
  const uint64_t vectors = bytes / 16;
  return static_cast<unsigned>(std::clamp<uint64_t>((vectors + kThreads - 1) / kThreads, 1, 8192));
}

int last_error() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

int launch_scatter(const uint8_t* src, const PieceSpan& span, const KvLayoutParams& p, unsigned long long* sums,
                   Stream stream) {
  scatter_kernel<<<blocks_for(span.bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(src, span, p, sums);
  return last_error();
}

int launch_gather(uint8_t* dst, const PieceSpan& span, const KvLayoutParams& p, Stream stream) {
  gather_kernel<<<blocks_for(span.bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(dst, span, p);
  return last_error();
}

int launch_record_sum(uint64_t first_token, uint32_t token_count, const KvLayoutParams& p, unsigned long long* sum,
                      Stream stream) {
  const uint64_t bytes = 2 * uint64_t{p.layers} * token_count * p.row_bytes;
  record_sum_kernel<<<blocks_for(bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(first_token, token_count,
                                                                                           p, sum);
  return last_error();
}

int launch_copy_sum(uint8_t* dst, const uint8_t* src, uint64_t bytes, uint64_t first_word, unsigned long long* sum,
                    Stream stream) {
  copy_sum_kernel<<<blocks_for(bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(dst, src, bytes, first_word,
                                                                                         sum);
  return last_error();
}

}  // namespace kvtier::cuda
