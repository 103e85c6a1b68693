// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "bench_kernels.hpp"

#include <cuda_runtime.h>

#include "synthetic_rows.hpp"

namespace kvtier::seed::cuda {
namespace {

// Word w of this rank's row of K or V (kv) in `layer` at position t: from the file where the cache
// has one, else synthetic.
__device__ uint64_t expected_word(const PagedCache& c, const int32_t* ids, uint64_t t, uint32_t kv,
                                  uint32_t layer, uint64_t block, uint64_t w) {
  if (c.file_words == nullptr) {
    return synthetic::kv_word(synthetic::row_seed(ids[t], t, block), c.first_word + w,
                              c.bf16_like != 0);
  }
  // The file is tiled over the whole model's heads, as on the host: the word's place in the
  // model's row picks its head.
  return c.file_words[kv_file_word(c.file, ids, kv, t, layer, c.first_word + w)];
}

// One thread per 8-byte word; consecutive threads walk one row, so accesses coalesce.
template <bool kCheck>
__global__ void fill_or_check(PagedCache c, const int32_t* ids, uint64_t tokens,
                              unsigned long long* first_bad) {
  const uint64_t total = tokens * c.kv_tensors * c.layer_count * c.row_words;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t w = i % c.row_words;
    const uint64_t r = i / c.row_words;
    const uint64_t t = r % tokens;
    const uint64_t block = r / tokens;  // kv * layers + layer, as the host generator numbers them
    const uint32_t kv = static_cast<uint32_t>(block / c.layer_count);
    const uint32_t layer = static_cast<uint32_t>(block % c.layer_count);
    const uint64_t slot = uint64_t(c.table[t / c.block_size]) * c.block_size + t % c.block_size;
    uint64_t* row =
        c.layers[layer] + (uint64_t{kv} * c.num_blocks * c.block_size + slot) * c.row_words;
    const uint64_t v = expected_word(c, ids, t, kv, layer, block, w);
    if constexpr (kCheck) {
      if (row[w] != v) atomicMin(first_bad, static_cast<unsigned long long>(t));
    } else {
      row[w] = v;
    }
  }
}

constexpr unsigned kThreads = 256;
constexpr unsigned kBlocks = 132 * 16;  // enough to fill an H200; the loop strides over the rest

}  // namespace

int launch_fill(const PagedCache& cache, const int32_t* ids, uint64_t tokens, void* stream) {
  fill_or_check<false>
      <<<kBlocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(cache, ids, tokens, nullptr);
  return static_cast<int>(cudaGetLastError());
}

int launch_check(const PagedCache& cache, const int32_t* ids, uint64_t tokens,
                 unsigned long long* first_bad, void* stream) {
  fill_or_check<true>
      <<<kBlocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(cache, ids, tokens, first_bad);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier::seed::cuda
