// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Which KV heads a tensor-parallel rank holds, and which head groups of a TP-free store it reads
// and writes (docs/format-v2-plan.md): the map that lets ranks of any TP size share one store.
#pragma once

#include <cstdint>

#include "kvtier/status.hpp"

namespace kvtier {

/// How a model's KV heads are split into the groups a store keeps apart.
struct HeadSplit {
  uint32_t kv_heads = 0;  ///< The model's KV heads (1 for MLA's latent).
  uint32_t max_tp = 8;    ///< The largest TP size the store must serve.
  /// Groups: gcd(kv_heads, max_tp), so every TP size that divides max_tp holds whole groups.
  [[nodiscard]] uint32_t groups() const;
  [[nodiscard]] uint32_t heads_per_group() const { return kv_heads / groups(); }
};

/// What one rank of a TP group holds.
struct RankHeads {
  uint32_t first_head = 0;   ///< The model's head index of the rank's first head.
  uint32_t heads = 0;        ///< Heads the rank holds: kv_heads / tp, or 1 when tp > kv_heads.
  uint32_t first_group = 0;  ///< The groups covering those heads: [first_group, + groups).
  uint32_t groups = 0;
  /// Whether this rank writes its groups: the lowest rank holding a group writes it; the ranks
  /// that hold a replicated head read it only.
  bool writes = false;
};

/// The heads and groups of rank `rank` of `tp`. Refused (kInvalidArgument, saying why): a rank
/// outside the group; a TP size that splits a head (kv_heads and tp both not multiples of the
/// other, which vLLM refuses too); a TP size whose ranks would not hold whole groups (more ranks
/// than groups while each rank holds several heads, or replicated heads over groups of several
/// heads). Every TP size that divides max_tp and that vLLM accepts is taken.
[[nodiscard]] Result<RankHeads> rank_heads(const HeadSplit& split, uint32_t rank, uint32_t tp);

}  // namespace kvtier
