// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's CUDA kernels (bench_kernels.cu): the prefill stand-in and the byte-exact
// check of a restored paged cache. Plain C++ interface.
#pragma once

#include <cstdint>

#include "kv_file_rows.hpp"

namespace kvtier::seed::cuda {

/// The cache: per layer a [kv_tensors, num_blocks, block_size, row_words * 8 bytes] tensor.
struct PagedCache {
  uint64_t* const* layers;  // device array of layer bases
  const int32_t* table;     // device block table
  uint32_t layer_count;
  uint32_t num_blocks;
  uint32_t block_size;
  uint32_t row_words;
  uint32_t kv_tensors;  // 2: K and V; 1: MLA's latent
  /// Word of the model's row where this rank's row starts (synthetic::first_word).
  uint64_t first_word;
  /// 1: the KV is synthetic::bf16_like_word's (compressible), 0: random words.
  uint32_t bf16_like;
  /// Where not null, the KV is tiled from this file (kv_file_rows.hpp) instead of synthetic: its
  /// words in GPU memory, of shape `file` (heads of whole words: BenchKv::create checks).
  const uint64_t* file_words;
  KvFileDims file;
};

/// Writes the KV of `ids` (device array of `tokens` ids). Returns a cudaError_t.
int launch_fill(const PagedCache& cache, const int32_t* ids, uint64_t tokens, void* stream);

/// Lowers *first_bad (device) to the first token whose KV differs. Returns a cudaError_t.
int launch_check(const PagedCache& cache, const int32_t* ids, uint64_t tokens,
                 unsigned long long* first_bad, void* stream);

}  // namespace kvtier::seed::cuda
