// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "cuda/fast_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "test_util.hpp"

namespace kvtier::cuda {
namespace {

/// A target of every form over real memory (addresses are compared, never written).
struct Target {
  KvLayoutParams p;
  std::vector<uint8_t> contiguous;
  std::vector<std::vector<uint8_t>> layers;
  std::vector<uint8_t*> layer_base;
  std::vector<int32_t> table;

  /// `group_heads` heads from head `first_head` on are the record's (a head group of a TP-free
  /// store); 0: every head.
  Target(KvForm form, uint32_t block_size, std::mt19937_64& rng, uint32_t group_heads = 0,
         uint32_t first_head = 0) {
    p.form = form;
    p.layers = 3;
    p.heads = 3;
    p.head_bytes = 48;
    p.row_bytes = p.heads * p.head_bytes;
    if (group_heads != 0) {
      p.target_row_bytes = p.row_bytes;
      p.row_bytes = uint64_t{group_heads} * p.head_bytes;
      p.col_offset = uint64_t{first_head} * p.head_bytes;
    }
    p.capacity_tokens = 200;
    p.block_size = block_size;
    if (form == KvForm::kContiguous) {
      contiguous.resize(2 * p.layers * p.capacity_tokens * target_row(p));
      p.base = contiguous.data();
      return;
    }
    const uint32_t used = static_cast<uint32_t>((p.capacity_tokens + block_size - 1) / block_size);
    p.num_blocks = used + 5;
    // Blocks in a shuffled order, a few skipped (negative: the caller holds those tokens).
    std::vector<int32_t> blocks(p.num_blocks);
    for (uint32_t b = 0; b < p.num_blocks; ++b) blocks[b] = static_cast<int32_t>(b);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    table.assign(blocks.begin(), blocks.begin() + used);
    table[1] = -1;
    table[used / 2] = -1;
    for (uint32_t l = 0; l < p.layers; ++l) {
      layers.emplace_back(2 * p.num_blocks * block_size * target_row(p));
      layer_base.push_back(layers.back().data());
    }
    p.layer_base = layer_base.data();
    p.block_table = table.data();
  }
};

TEST(FastLayout, PlacesEveryVectorWhereTheHostDoesForEveryForm) {
  std::mt19937_64 rng(testing::test_seed());
  for (KvForm form : {KvForm::kContiguous, KvForm::kPagedKvFirst, KvForm::kPagedBlockFirst,
                      KvForm::kPagedPackedHeads, KvForm::kPagedPackedTokens}) {
    for (uint32_t block_size : {16u, 5u}) {
      // Every head, and head groups of one and two heads at each place in the row.
      for (auto [group_heads, first_head] :
           {std::pair{0u, 0u}, std::pair{1u, 0u}, std::pair{1u, 2u}, std::pair{2u, 1u}}) {
        const Target t(form, block_size, rng, group_heads, first_head);
        const FastLayout fast(t.p);
        // Records of a full chunk and of a partial last one, at several places in the session.
        for (uint32_t count : {16u, 7u}) {
          const FastDiv tokens(count);
          for (uint32_t first : {0u, 16u, 48u, 176u}) {
            if (first + count > t.p.capacity_tokens) continue;
            const uint64_t vectors = 2 * uint64_t{t.p.layers} * count * t.p.row_bytes / 16;
            for (uint32_t v = 0; v < vectors; ++v) {
              const PayloadPos pos = payload_pos(t.p, count, uint64_t{v} * 16);
              const uint8_t* want = kv_address(t.p, pos.kv, pos.layer, first + pos.token, pos.col);
              ASSERT_EQ(fast.address(v, first, tokens), want)
                  << "form " << static_cast<int>(form) << " block " << block_size << " heads "
                  << group_heads << "@" << first_head << " record " << first << "+" << count
                  << " vector " << v;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtier::cuda
