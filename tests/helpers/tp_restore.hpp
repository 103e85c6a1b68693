// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A rank's restore of a TP-free store's session in tests, into contiguous or paged memory drawn at
// random, read back in contiguous form for comparing with the rank's slice.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

#include "kvtier/kvtier.hpp"
#include "paged_reference.hpp"
#include "tp_reference.hpp"

namespace kvtier::testing {

/// Restores rank r of TP tp into poisoned memory, contiguous or paged at random, and returns the
/// restored rows in contiguous form with the result.
inline std::pair<std::vector<std::byte>, RestoreResult> restore_rank(
    Engine& e, const TpModel& m, const std::vector<Token>& tokens, uint32_t r, uint32_t tp,
    std::mt19937_64& rng) {
  const KvGeometry g = m.rank(r, tp);
  std::vector<std::byte> got(g.bytes_for_tokens(m.tokens), std::byte{0xEE});
  // A latent has no K and V to lay out in blocks the paged reference knows: contiguous.
  const int form = m.kv_tensors == 1 ? 4 : static_cast<int>(rng() % 5);
  Result<RestoreResult> restored = RestoreResult{};
  if (form == 4) {
    restored = e.restore(tokens, host_kv(got, m.tokens));
  } else {
    const auto layout = static_cast<PagedLayout>(form);
    const uint32_t block_size = 1 + static_cast<uint32_t>(rng() % 16);
    const uint32_t blocks = static_cast<uint32_t>((m.tokens + block_size - 1) / block_size) + 3;
    PagedHost paged(g, blocks, block_size, layout);
    const std::vector<int32_t> table = shuffled_blocks(m.tokens, block_size, blocks, rng());
    paged.view.block_table = table;
    restored = e.restore(tokens, paged.view);
    move_all(g, paged, table, got.data(), m.tokens, m.tokens, /*to_paged=*/false);
  }
  EXPECT_TRUE(restored) << restored.error().message();
  return {std::move(got), restored ? *restored : RestoreResult{}};
}

}  // namespace kvtier::testing
