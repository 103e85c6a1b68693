// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// KV scatter/gather between device staging and the caller's KV memory in any layout, with the
// kvsum64 checksum computed where the data lands. The checksum and layout formulas are the host's
// own (common/checksum.hpp, device/kv_layout.hpp), compiled for the device: bit-identical by
// construction.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/checksum.hpp"
#include "cuda/fast_layout.hpp"
#include "cuda/kernels.hpp"

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

/// Up to kMaxBatch spans per launch, passed by value: one launch per staging piece, not per span,
/// so short spans do not pay a launch and a tail wave each.
constexpr int kMaxBatch = 32;
struct ScatterItem {
  const uint8_t* src;
  PieceSpan span;
  FastDiv tokens;
};
struct ScatterBatch {
  uint32_t count;
  ScatterItem items[kMaxBatch];
};

template <bool kChecksum>
__global__ void scatter_kernel(ScatterBatch batch, FastLayout f, unsigned long long* sums) {
  const ScatterItem& item = batch.items[blockIdx.y];
  const uint32_t vectors = static_cast<uint32_t>(item.span.bytes / 16);
  const uint32_t first_vector = static_cast<uint32_t>(item.span.payload_offset / 16);
  const uint32_t first_token = static_cast<uint32_t>(item.span.first_token);
  unsigned long long acc = 0;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vectors;
       i += gridDim.x * blockDim.x) {
    const uint32_t v = first_vector + i;
    const uint4 value = reinterpret_cast<const uint4*>(item.src)[i];
    // A skipped block (the caller holds those tokens already) is verified, not written.
    if (uint8_t* dst = f.address(v, first_token, item.tokens))
      *reinterpret_cast<uint4*>(dst) = value;
    if constexpr (kChecksum) acc += terms_of(value, uint64_t{v} * 2);
  }
  if constexpr (kChecksum) {
    const unsigned long long total = block_sum(acc);
    if (threadIdx.x == 0 && total != 0) atomicAdd(&sums[item.span.record], total);
  }
}

__global__ void gather_kernel(uint8_t* __restrict__ dst, PieceSpan span, FastLayout f,
                              FastDiv tokens) {
  const uint32_t vectors = static_cast<uint32_t>(span.bytes / 16);
  const uint32_t first_vector = static_cast<uint32_t>(span.payload_offset / 16);
  const uint32_t first_token = static_cast<uint32_t>(span.first_token);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vectors;
       i += gridDim.x * blockDim.x) {
    reinterpret_cast<uint4*>(dst)[i] =
        *reinterpret_cast<const uint4*>(f.address(first_vector + i, first_token, tokens));
  }
}

__global__ void record_sum_kernel(uint32_t first_token, uint32_t count, FastLayout f,
                                  FastDiv tokens, unsigned long long* sum) {
  const uint32_t vectors =
      static_cast<uint32_t>(uint64_t{f.p.kv_tensors} * f.p.layers * count * f.p.row_bytes / 16);
  unsigned long long acc = 0;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vectors;
       i += gridDim.x * blockDim.x) {
    const uint4 v = *reinterpret_cast<const uint4*>(f.address(i, first_token, tokens));
    acc += terms_of(v, uint64_t{i} * 2);
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

int launch_scatter(const ScatterJob* jobs, size_t count, const KvLayoutParams& p,
                   unsigned long long* sums, Stream stream, bool checksum) {
  const FastLayout layout(p);
  for (size_t first = 0; first < count; first += kMaxBatch) {
    ScatterBatch batch{};
    uint64_t largest = 0;
    for (size_t i = first; i < std::min(count, first + kMaxBatch); ++i) {
      batch.items[batch.count++] = {jobs[i].src, jobs[i].span, FastDiv(jobs[i].span.token_count)};
      largest = std::max(largest, jobs[i].span.bytes);
    }
    const dim3 grid(std::max(1u, blocks_for(largest) / batch.count), batch.count);
    if (checksum) {
      scatter_kernel<true>
          <<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(batch, layout, sums);
    } else {
      scatter_kernel<false>
          <<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(batch, layout, sums);
    }
    if (int err = last_error(); err != 0) return err;
  }
  return 0;
}

int launch_gather(uint8_t* dst, const PieceSpan& span, const KvLayoutParams& p, Stream stream) {
  gather_kernel<<<blocks_for(span.bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      dst, span, FastLayout(p), FastDiv(span.token_count));
  return last_error();
}

int launch_record_sum(uint64_t first_token, uint32_t token_count, const KvLayoutParams& p,
                      unsigned long long* sum, Stream stream) {
  const uint64_t bytes = uint64_t{p.kv_tensors} * p.layers * token_count * p.row_bytes;
  record_sum_kernel<<<blocks_for(bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint32_t>(first_token), token_count, FastLayout(p), FastDiv(token_count), sum);
  return last_error();
}

}  // namespace kvtier::cuda
