// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/head_group_stores.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "api/env.hpp"
#include "api/try.hpp"
#include "common/head_groups.hpp"
#include "common/keys.hpp"

namespace kvtier {
namespace {

/// The model's name for its TP-free store's directory: the same whatever the TP size.
std::string model_dir(const KvGeometry& rank) {
  KvGeometry model = rank;
  model.kv_heads = rank.total_kv_heads();
  model.kv_heads_total = 0;
  model.tp_rank = 0;
  model.tp_world = 1;
  return namespace_key(model, "").hex();
}

constexpr uint64_t kDefaultCapacity = uint64_t{64} << 30;

}  // namespace

Result<std::vector<std::unique_ptr<Engine::Impl>>> open_store_parts(const Options& options) {
  std::vector<std::unique_ptr<Engine::Impl>> parts;
  if (options.store_format != 2) {
    KVTIER_ASSIGN_OR_RETURN(auto impl, Engine::Impl::create(options));
    parts.push_back(std::move(impl));
    return parts;
  }
  KVTIER_ASSIGN_OR_RETURN(const Options checked, options.resolved());
  (void)checked;
  const KvGeometry& rank = options.geometry;
  const HeadSplit split{rank.total_kv_heads(), options.max_tp};
  KVTIER_ASSIGN_OR_RETURN(RankHeads held, rank_heads(split, rank.tp_rank, rank.tp_world));
  KVTIER_EXPECTS(
      held.heads == rank.kv_heads,
      fmt::format("geometry: rank {} of TP {} holds {} of the model's {} KV heads, not "
                  "the kv_heads {} given",
                  rank.tp_rank, rank.tp_world, held.heads, split.kv_heads, rank.kv_heads));
  if (held.heads * rank.tp_world != split.kv_heads) {
    // Ranks that replicate a head share its group: one writes, the others follow its index as it
    // grows, which TP-free stores cannot do yet.
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("store_format 2: TP {} is more ranks than the model's {} KV heads; a "
                            "TP-free store serves TP sizes up to the KV heads for now (use "
                            "store_format 1)",
                            rank.tp_world, split.kv_heads));
  }
  // The store's bounds are the rank's share of the model's: a group gets 1/G of the capacity per
  // drive, and this rank's DRAM tier is shared by the groups it holds.
  KVTIER_ASSIGN_OR_RETURN(EnvOverrides env, read_env_overrides());
  const uint32_t groups = split.groups();
  const uint64_t capacity = options.capacity_bytes != 0
                                ? options.capacity_bytes
                                : env.capacity_bytes.value_or(kDefaultCapacity);
  const uint64_t dram = options.dram_bytes != 0 ? options.dram_bytes : env.dram_bytes.value_or(0);
  const std::string dir = model_dir(rank);
  for (uint32_t k = 0; k < held.groups; ++k) {
    const uint32_t group = held.first_group + k;
    Options o = options;
    o.geometry.kv_heads = split.heads_per_group();
    o.geometry.kv_heads_total = 0;
    o.geometry.tp_rank = group;
    o.geometry.tp_world = groups;
    o.capacity_bytes = capacity / groups / 4096 * 4096;
    o.dram_bytes = dram / held.groups / 4096 * 4096;
    StorePart part;
    part.dir_name = fmt::format("kvtier2/{}/g{}of{}", dir, group, groups);
    part.memory_heads = rank.kv_heads;
    part.first_head = k * split.heads_per_group();
    KVTIER_ASSIGN_OR_RETURN(auto impl, Engine::Impl::create(o, part));
    parts.push_back(std::move(impl));
  }
  return parts;
}

Stats combine_part_stats(std::span<const Stats> parts) {
  Stats all = parts[0];
  // Counted once per Engine call, which every part sees.
  constexpr std::string_view kPerCall[] = {"saves", "lookups", "lookup_hit_tokens", "restores",
                                           "tokens_restored"};
  // The same for every part (their drives are the same drives).
  constexpr std::string_view kShared[] = {"segment_bytes", "drives", "drives_offline",
                                          "drives_out_of_placement"};
  auto in = [](std::string_view name, std::span<const std::string_view> list) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (size_t i = 1; i < parts.size(); ++i) {
    for (const StatField& f : stat_fields()) {
      if (f.kind == StatField::Kind::kText) {
        if ((all.*f.text).empty()) all.*f.text = parts[i].*f.text;
      } else if (f.kind != StatField::Kind::kHistogram && !in(f.name, kPerCall)) {
        all.*f.number = in(f.name, kShared) ? std::max(all.*f.number, parts[i].*f.number)
                                            : all.*f.number + parts[i].*f.number;
      }
    }
  }
  return all;
}

}  // namespace kvtier
