// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/head_group_stores.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <thread>

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
  return namespace_key(model, "", 2).hex();
}

constexpr uint64_t kDefaultCapacity = uint64_t{64} << 30;

Result<std::unique_ptr<Engine::Impl>> open_part(const Options& o, const StorePart& part,
                                                const KvGeometry& rank) {
  const auto wait = std::chrono::milliseconds(o.writer_wait_ms);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto impl = Engine::Impl::create(o, part);
    if (!impl && impl.error().code() != ErrorCode::kNotFound) {
      return fail(impl.error().with_context(fmt::format(
          "head group {} of {} (store_format 2 gives each group 1/{} of the capacity and this "
          "rank's DRAM tier 1/{} each)",
          o.geometry.tp_rank, o.geometry.tp_world, o.geometry.tp_world, part.share_of_rank)));
    }
    if (impl || !part.follower || impl.error().code() != ErrorCode::kNotFound ||
        std::chrono::steady_clock::now() > deadline) {
      if (!impl && part.follower && impl.error().code() == ErrorCode::kNotFound) {
        return fail(ErrorCode::kNotFound,
                    fmt::format("rank {} of TP {} reads head group {} of {}, which the lowest rank "
                                "holding it writes; no such store appeared in {} ms: {}",
                                rank.tp_rank, rank.tp_world, o.geometry.tp_rank,
                                o.geometry.tp_world, wait.count(), impl.error().message()));
      }
      return impl;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

Result<std::vector<std::unique_ptr<Engine::Impl>>> open_store_parts(const Options& options) {
  std::vector<std::unique_ptr<Engine::Impl>> parts;
  if (options.store_format != 2) {
    KVTIER_EXPECTS(options.geometry.kv_tensors == 2,
                   "geometry: a latent (kv_tensors 1, MLA) is kept by TP-free stores only "
                   "(store_format 2), whose records say how many tensors they hold");
    KVTIER_ASSIGN_OR_RETURN(auto impl, Engine::Impl::create(options));
    parts.push_back(std::move(impl));
    return parts;
  }
  KVTIER_ASSIGN_OR_RETURN(const Options checked, options.resolved());
  const KvGeometry& rank = options.geometry;
  const HeadSplit split{rank.total_kv_heads(), options.max_tp};
  KVTIER_ASSIGN_OR_RETURN(RankHeads held, rank_heads(split, rank.tp_rank, rank.tp_world));
  KVTIER_EXPECTS(
      held.heads == rank.kv_heads,
      fmt::format("geometry: rank {} of TP {} holds {} of the model's {} KV heads, not "
                  "the kv_heads {} given",
                  rank.tp_rank, rank.tp_world, held.heads, split.kv_heads, rank.kv_heads));
  // The store's bounds are the rank's share of the model's: a group gets 1/G of the capacity per
  // drive (asked for, or a new store's default; an existing store unasked keeps its own), and this
  // rank's DRAM tier is shared by the groups it holds.
  KVTIER_ASSIGN_OR_RETURN(EnvOverrides env, read_env_overrides());
  const uint32_t groups = split.groups();
  const std::optional<uint64_t> capacity =
      options.capacity_bytes != 0 ? std::optional(options.capacity_bytes) : env.capacity_bytes;
  const uint64_t dram = options.dram_bytes != 0 ? options.dram_bytes : env.dram_bytes.value_or(0);
  auto share = [](uint64_t bytes, uint32_t parts) { return bytes / parts / 4096 * 4096; };
  KVTIER_EXPECTS(!capacity || share(*capacity, groups) > 0,
                 fmt::format("store_format 2: a capacity of {} split over the model's {} head "
                             "groups leaves less than 4 KiB per group",
                             size_text(*capacity), groups));
  KVTIER_EXPECTS(dram == 0 || share(dram, held.groups) > 0,
                 fmt::format("store_format 2: a DRAM tier of {} split over the {} head groups this "
                             "rank holds leaves less than 4 KiB per group",
                             size_text(dram), held.groups));
  const std::string dir = model_dir(rank);
  auto group_options = [&](uint32_t k, StorePart& part) {
    const uint32_t group = held.first_group + k;
    Options o = options;
    o.geometry.kv_heads = split.heads_per_group();
    o.geometry.kv_heads_total = 0;
    o.geometry.tp_rank = group;
    o.geometry.tp_world = groups;
    if (capacity) {
      o.capacity_bytes = share(*capacity, groups);
    } else {
      part.new_store_capacity = share(kDefaultCapacity, groups);
    }
    o.dram_bytes = share(dram, held.groups);
    part.dir_name = fmt::format("kvtier2/{}/g{}of{}", dir, group, groups);
    part.memory_heads = rank.kv_heads;
    part.first_head = k * split.heads_per_group();
    part.share_of_rank = held.groups;
    // Ranks that replicate a head (more ranks than KV heads) share its group: the lowest writes
    // it, the others follow its index (StorePart::follower) and keep no DRAM tier of their own.
    part.follower = !held.writes;
    if (part.follower) {
      o.read_only = true;
      o.dram_bytes = 0;
    }
    return o;
  };
  // The groups' stores lie on the same drives and restore at once: one tuning for all (the first
  // group's store probes the drives when they need it), and the rank's staging split over them.
  IoSettings io{checked.io_request_bytes, checked.staging_bytes, "", {}};
  const bool sizes_asked = options.io_request_bytes != 0 || options.staging_bytes != 0 ||
                           env.io_request_bytes || env.staging_bytes;
  if (held.groups > 1 && options.tune && !sizes_asked) {
    StorePart part;
    const Options o = group_options(0, part);
    KVTIER_ASSIGN_OR_RETURN(auto first, open_part(o, part, rank));
    io = first->io_settings_;
  }
  for (uint32_t k = 0; k < held.groups; ++k) {
    StorePart part;
    Options o = group_options(k, part);
    if (held.groups > 1) {
      o.io_request_bytes = io.request_bytes;
      o.staging_bytes = std::max(io.request_bytes, share(io.staging_bytes, held.groups));
    }
    KVTIER_ASSIGN_OR_RETURN(auto impl, open_part(o, part, rank));
    parts.push_back(std::move(impl));
  }
  if (held.groups > 1) {
    IoSettings& shown = parts[0]->io_settings_;
    if (!io.source.empty()) {
      shown = io;  // the tuning, as found
    } else {
      shown.source = options.io_request_bytes != 0 || options.staging_bytes != 0 ? "options"
                     : sizes_asked                                               ? "environment"
                                   : "defaults (tuning off)";
    }
    shown.staging_bytes = io.staging_bytes;
    shown.source += fmt::format(" (staging split over {} head-group stores)", held.groups);
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
