// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/head_groups.hpp"

#include <fmt/format.h>

#include <numeric>

namespace kvtier {

uint32_t HeadSplit::groups() const { return std::gcd(kv_heads, max_tp); }

Result<RankHeads> rank_heads(const HeadSplit& split, uint32_t rank, uint32_t tp) {
  const uint32_t heads = split.kv_heads;
  auto refuse = [&](const std::string& why) {
    return Failure(
        Status(ErrorCode::kInvalidArgument,
               fmt::format("rank {} of TP {} over {} KV heads (store groups for TP up to {}): {}",
                           rank, tp, heads, split.max_tp, why)));
  };
  if (heads == 0 || split.max_tp == 0) return refuse("no heads or no TP size to split for");
  if (tp == 0 || rank >= tp) return refuse("the rank is not in the group");
  if (heads % tp != 0 && tp % heads != 0) {
    return refuse("a head would be split across ranks (neither divides the other)");
  }
  const uint32_t groups = split.groups();
  RankHeads out;
  if (tp <= heads) {
    if (groups % tp != 0) {
      return refuse(
          fmt::format("{} groups cannot be dealt evenly to {} ranks; a store made for "
                      "TP up to a multiple of {} can",
                      groups, tp, tp));
    }
    out.heads = heads / tp;
    out.first_head = rank * out.heads;
    out.groups = groups / tp;
    out.first_group = rank * out.groups;
    out.writes = true;
    return out;
  }
  // More ranks than heads: vLLM gives each rank one head, each head to tp / heads ranks.
  if (groups != heads) {
    return refuse(
        fmt::format("TP {} replicates heads but the store splits them into {} groups of "
                    "{}; make the store for TP up to a multiple of {}",
                    tp, groups, split.heads_per_group(), heads));
  }
  const uint32_t sharing = tp / heads;
  out.heads = 1;
  out.first_head = rank / sharing;
  out.groups = 1;
  out.first_group = out.first_head;
  out.writes = rank % sharing == 0;
  return out;
}

}  // namespace kvtier
