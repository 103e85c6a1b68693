// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// An independent statement of each paged layout, written as nested loops over the tensor's own
// dimensions (not kvtier's address formulas), to check the engine's placement against.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kvtier/kvtier.hpp"

namespace kvtier::testing {

/// A paged KV cache in host memory: one vector per layer.
struct PagedHost {
  PagedHost(const KvGeometry& g, uint32_t num_blocks, uint32_t block_size, PagedLayout layout)
      : layer_bytes(uint64_t{num_blocks} * 2 * block_size * g.row_bytes()), layers(g.layers) {
    for (auto& l : layers) l.assign(layer_bytes, std::byte{0xEE});
    view.block_size = block_size;
    view.num_blocks = num_blocks;
    view.layout = layout;
    for (auto& l : layers) view.layers.push_back({l.data(), layer_bytes, MemoryKind::kHost, 0});
  }
  uint64_t layer_bytes;
  std::vector<std::vector<std::byte>> layers;
  PagedKv view;
};

/// Blocks for `tokens` tokens, drawn without repetition from `num_blocks` in shuffled order.
inline std::vector<int32_t> shuffled_blocks(uint64_t tokens, uint32_t block_size,
                                            uint32_t num_blocks, uint64_t seed) {
  std::vector<int32_t> all(num_blocks);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937_64(seed));
  all.resize((tokens + block_size - 1) / block_size);
  return all;
}

/// Copies token t's K or V row of layer l between contiguous [2, L, T, H*D] and the paged tensors.
/// to_paged: contiguous -> paged; else paged -> contiguous.
inline void move_row(const KvGeometry& g, PagedLayout layout,
                     std::vector<std::vector<std::byte>>& layers, const std::vector<int32_t>& table,
                     uint32_t bs, uint32_t nb, std::byte* contiguous, uint64_t capacity,
                     uint32_t kv, uint32_t l, uint64_t t, bool to_paged) {
  const uint64_t H = g.kv_heads, Dbytes = uint64_t{g.head_dim} * g.element_bytes;
  const uint64_t blk = static_cast<uint64_t>(table[t / bs]), in = t % bs;
  std::byte* row = contiguous + ((uint64_t{kv} * g.layers + l) * capacity + t) * H * Dbytes;
  for (uint64_t h = 0; h < H; ++h) {
    uint64_t index = 0;  // byte index of element [.., h, 0] in the layer tensor
    switch (layout) {
      case PagedLayout::kKvFirst:  // [2][nb][bs][H][D]
        index = (((kv * nb + blk) * bs + in) * H + h) * Dbytes;
        break;
      case PagedLayout::kBlockFirst:  // [nb][2][bs][H][D]
        index = (((blk * 2 + kv) * bs + in) * H + h) * Dbytes;
        break;
      case PagedLayout::kPackedHeads:  // [nb][H][bs][2*D], K then V in the last dimension
        index = ((blk * H + h) * bs + in) * 2 * Dbytes + kv * Dbytes;
        break;
      case PagedLayout::kPackedTokens:  // [nb][bs][H][2*D], K then V in the last dimension
        index = ((blk * bs + in) * H + h) * 2 * Dbytes + kv * Dbytes;
        break;
    }
    std::byte* p = layers[l].data() + index;
    if (to_paged)
      std::memcpy(p, row + h * Dbytes, Dbytes);
    else
      std::memcpy(row + h * Dbytes, p, Dbytes);
  }
}

inline void move_all(const KvGeometry& g, PagedHost& paged, const std::vector<int32_t>& table,
                     std::byte* contiguous, uint64_t capacity, uint64_t tokens, bool to_paged) {
  for (uint32_t kv = 0; kv < 2; ++kv)
    for (uint32_t l = 0; l < g.layers; ++l)
      for (uint64_t t = 0; t < tokens; ++t)
        move_row(g, paged.view.layout, paged.layers, table, paged.view.block_size,
                 paged.view.num_blocks, contiguous, capacity, kv, l, t, to_paged);
}

/// move_all() with a block table per layer (`tables[l]`): rows of tokens [0, tokens) whose block
/// a layer's table skips (-1) are left alone.
inline void move_held(const KvGeometry& g, PagedHost& paged,
                      const std::vector<std::vector<int32_t>>& tables, std::byte* contiguous,
                      uint64_t capacity, uint64_t tokens, bool to_paged) {
  const uint32_t bs = paged.view.block_size;
  for (uint32_t kv = 0; kv < 2; ++kv)
    for (uint32_t l = 0; l < g.layers; ++l)
      for (uint64_t t = 0; t < tokens; ++t) {
        if (tables[l][t / bs] < 0) continue;
        move_row(g, paged.view.layout, paged.layers, tables[l], bs, paged.view.num_blocks,
                 contiguous, capacity, kv, l, t, to_paged);
      }
}

/// Whether `back` (contiguous [2, L, n, row], read back through the blocks' real homes) holds the
/// untouched 0xEE fill for tokens [0, skipped) and `want`'s rows for every later token.
inline ::testing::AssertionResult restored_except_skipped(const KvGeometry& g,
                                                          const std::byte* back,
                                                          const std::byte* want, uint64_t n,
                                                          uint64_t skipped) {
  const uint64_t row = g.row_bytes();
  for (uint32_t kvi = 0; kvi < 2; ++kvi) {
    for (uint32_t l = 0; l < g.layers; ++l) {
      for (uint64_t t = 0; t < n; ++t) {
        const uint64_t at = ((uint64_t{kvi} * g.layers + l) * n + t) * row;
        const std::byte* got = back + at;
        if (t < skipped &&
            !std::all_of(got, got + row, [](std::byte b) { return b == std::byte{0xEE}; })) {
          return ::testing::AssertionFailure()
                 << "skipped token " << t << " of layer " << l << " was written";
        }
        if (t >= skipped && std::memcmp(got, want + at, row) != 0) {
          return ::testing::AssertionFailure() << "token " << t << " of layer " << l << " differs";
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvtier::testing
