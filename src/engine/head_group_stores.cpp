// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/head_group_stores.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "api/env.hpp"
#include "api/try.hpp"
#include "common/head_groups.hpp"
#include "common/keys.hpp"
#include "engine/tuning.hpp"

namespace kvtier {
namespace {

/// The whole model as one rank of TP 1 sees it: the same whatever the TP size.
KvGeometry whole_model(const KvGeometry& rank) {
  KvGeometry model = rank;
  model.state_bytes = rank.state_bytes * rank.tp_world;  // a rank's share of the model's state
  model.kv_heads = rank.total_kv_heads();
  model.kv_heads_total = 0;
  model.tp_rank = 0;
  model.tp_world = 1;
  return model;
}

/// The model's name for its TP-free store's directory.
std::string model_dir(const KvGeometry& rank) {
  return namespace_key(whole_model(rank), "", 2).hex();
}

constexpr uint64_t kDefaultCapacity = uint64_t{64} << 30;

/// The layers of `rank` of `kind`, in model order.
std::vector<uint32_t> layers_of_kind(const KvGeometry& rank, LayerKind kind) {
  std::vector<uint32_t> out;
  for (uint32_t l = 0; l < rank.layers; ++l) {
    const LayerKind k = rank.layer_kinds.empty() ? LayerKind::kFullAttention : rank.layer_kinds[l];
    if (k == kind) out.push_back(l);
  }
  return out;
}

/// A hybrid model's part keeps plain records of one kind: its geometry is the model's without the
/// hybrid fields, which its namespace and directory carry instead.
KvGeometry plain(KvGeometry g) {
  g.layer_kinds.clear();
  g.window_tokens = 0;
  g.window_chunk_tokens = 0;
  g.state_layers = 0;
  g.state_bytes = 0;
  return g;
}

/// The rank's recurrent state as a store's geometry: one latent row of `rows` x `row` bytes per
/// layer, a chunk of `rows` rows being the state (record kind 3). The row is the widest that
/// divides the state (a multiple of 16 where the state is, as GPU copies need) and leaves at most
/// 65536 rows.
Result<KvGeometry> state_geometry(const KvGeometry& rank) {
  for (uint64_t step : {16, 8}) {
    if (rank.state_bytes % step != 0) continue;
    for (uint64_t row = 4096 / step * step; row >= step; row -= step) {
      if (rank.state_bytes % row != 0 || rank.state_bytes / row > 65536) continue;
      KvGeometry g;
      g.model_id = rank.model_id;
      g.layers = rank.state_layers;
      g.kv_heads = 1;
      g.kv_tensors = 1;
      g.element_bytes = 1;
      g.head_dim = static_cast<uint32_t>(row);
      g.chunk_tokens = static_cast<uint32_t>(rank.state_bytes / row);
      g.tp_rank = rank.tp_rank;
      g.tp_world = rank.tp_world;
      return g;
    }
  }
  return fail(ErrorCode::kInvalidArgument,
              fmt::format("geometry: a recurrent layer's state of {} bytes is not a multiple of 8 "
                          "bytes in at most 65536 rows of at most 4096 bytes (256 MiB)",
                          rank.state_bytes));
}

/// Every drive directory of `options`, the root first.
std::vector<std::string> drive_roots(const Options& options) {
  std::vector<std::string> roots{options.root};
  roots.insert(roots.end(), options.extra_roots.begin(), options.extra_roots.end());
  return roots;
}

bool on_a_drive(const std::vector<std::string>& roots, const std::string& dir) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::string& root) {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::path(root) / dir, ec);
  });
}

Result<std::unique_ptr<Engine::Impl>> open_part(const Options& o, const StorePart& part,
                                                const KvGeometry& rank) {
  const auto wait = std::chrono::milliseconds(o.writer_wait_ms);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto impl = Engine::Impl::create(o, part);
    if (!impl && impl.error().code() != ErrorCode::kNotFound && part.kind == 3) {
      return fail(impl.error().with_context(fmt::format(
          "the recurrent-state store of rank {} of TP {} (every rank keeps one: together they take "
          "one store's share of the capacity, and each 1/{} of its rank's DRAM tier)",
          rank.tp_rank, rank.tp_world, part.share_of_rank)));
    }
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
    KVTIER_EXPECTS(
        !options.geometry.hybrid(),
        "geometry: a hybrid model (sliding-window or recurrent layers) is kept by "
        "TP-free stores only (store_format 2), whose records say which layers they hold");
    KVTIER_EXPECTS(options.geometry.kv_tensors == 2,
                   "geometry: a latent (kv_tensors 1, MLA) is kept by TP-free stores only "
                   "(store_format 2), whose records say how many tensors they hold");
    // The ranks on the same drives share one tuning, and each reads with all of it (the probe
    // timed one reader).
    KVTIER_ASSIGN_OR_RETURN(auto impl, Engine::Impl::create(options, StorePart{}));
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
  // A hybrid model keeps each group's sliding-window KV in a store of its own beside the group's
  // full-attention one, and the rank's recurrent state in one more: the bounds split over them.
  const bool windowed = rank.layers_of(LayerKind::kSlidingWindow) > 0;
  const uint32_t kinds = windowed ? 2 : 1;
  const uint32_t rank_stores = held.groups * kinds + (rank.state_layers > 0 ? 1 : 0);
  // Every rank keeps a state store of its own (s<r>of<t>): they share one store's bounds.
  const uint32_t model_stores = groups * kinds + (rank.state_layers > 0 ? 1 : 0);
  const uint32_t state_split = model_stores * rank.tp_world;
  const std::optional<uint64_t> capacity =
      options.capacity_bytes != 0 ? std::optional(options.capacity_bytes) : env.capacity_bytes;
  const uint64_t dram = options.dram_bytes != 0 ? options.dram_bytes : env.dram_bytes.value_or(0);
  auto share = [](uint64_t bytes, uint32_t parts) { return bytes / parts / 4096 * 4096; };
  const char* stores = rank.hybrid() ? "stores (head groups, layer kinds, state)" : "head groups";
  KVTIER_EXPECTS(
      !capacity || share(*capacity, rank.state_layers > 0 ? state_split : model_stores) > 0,
      fmt::format("store_format 2: a capacity of {} split over the model's {} {} "
                  "leaves less than 4 KiB each",
                  size_text(*capacity), model_stores, stores));
  KVTIER_EXPECTS(dram == 0 || share(dram, rank_stores) > 0,
                 fmt::format("store_format 2: a DRAM tier of {} split over the {} {} this rank "
                             "holds leaves less than 4 KiB each",
                             size_text(dram), rank_stores, stores));
  const std::string dir = model_dir(rank);
  // A hybrid part's records are plain ones of some layers: the model, whole, goes in their keys.
  const std::string model_text = rank.hybrid() ? whole_model(rank).describe() : "";
  auto bounds = [&](Options& o, StorePart& part, uint32_t split) {
    if (capacity) {
      o.capacity_bytes = share(*capacity, split);
    } else {
      part.new_store_capacity = share(kDefaultCapacity, split);
    }
    o.dram_bytes = share(dram, rank_stores);
    part.share_of_rank = rank_stores;
  };
  auto group_options = [&](uint32_t k, StorePart& part,
                           LayerKind kind = LayerKind::kFullAttention) {
    const uint32_t group = held.first_group + k;
    Options o = options;
    if (rank.hybrid()) {
      o.geometry = plain(rank);
      o.geometry.layers = rank.layers_of(kind);
      if (kind == LayerKind::kSlidingWindow) o.geometry.chunk_tokens = rank.window_chunk();
      if (windowed) part.layers = layers_of_kind(rank, kind);
      part.memory_layers = rank.layers;
      part.kind = kind == LayerKind::kSlidingWindow ? 2 : 1;
      part.namespace_part = fmt::format("{}/kind{}", model_text, part.kind);
    }
    o.geometry.kv_heads = split.heads_per_group();
    o.geometry.kv_heads_total = 0;
    o.geometry.tp_rank = group;
    o.geometry.tp_world = groups;
    bounds(o, part, model_stores);
    part.dir_name = fmt::format("kvtier2/{}/{}{}of{}", dir,
                                kind == LayerKind::kSlidingWindow ? 'w' : 'g', group, groups);
    part.memory_heads = rank.kv_heads;
    part.first_head = k * split.heads_per_group();
    // Ranks that replicate a head (more ranks than KV heads) share its group: the lowest writes
    // it, the others follow its index (StorePart::follower) and keep no DRAM tier of their own.
    part.follower = !held.writes;
    if (part.follower) {
      o.read_only = true;
      part.no_dram = true;
    }
    return o;
  };
  // The model's stores lie on the same drives and every rank restores at once: one tuning for all
  // (the rank's first store probes the drives when they need it). What it found is what one reader
  // wants in flight, as the probe timed it: every rank reads with all of it, each of the rank's
  // stores with an equal share, so a rank puts the same bytes in flight at any TP size and
  // whichever TP size saved the store. The defaults and sizes asked are the rank's, split over
  // its stores.
  IoSettings io{checked.io_request_bytes, checked.staging_bytes, "", {}};
  const bool sizes_asked = options.io_request_bytes != 0 || options.staging_bytes != 0 ||
                           env.io_request_bytes || env.staging_bytes;
  std::unique_ptr<Engine::Impl> first;
  if (options.tune && !sizes_asked) {
    StorePart part;
    const Options o = group_options(0, part);
    part.staging_split = rank_stores;
    part.tuned_readers = rank_stores;
    KVTIER_ASSIGN_OR_RETURN(first, open_part(o, part, rank));
    io = first->io_settings_;
  }
  const bool tuned = io.source == "tuned";
  const StoreShare each = tuned ? tuned_share(io.staging_bytes, io.request_bytes, rank_stores)
                                : split_share(io.staging_bytes, io.request_bytes, rank_stores);
  auto add = [&](Options o, const StorePart& part) -> Status {
    if (tuned || rank_stores > 1) {
      o.io_request_bytes = each.request_bytes;
      o.staging_bytes = each.staging_bytes;
    }
    KVTIER_ASSIGN_OR_RETURN(auto impl, open_part(o, part, rank));
    parts.push_back(std::move(impl));
    return {};
  };
  for (uint32_t k = 0; k < held.groups; ++k) {
    if (k == 0 && first) {
      parts.push_back(std::move(first));
      continue;
    }
    StorePart part;
    const Options o = group_options(k, part);
    KVTIER_TRY(add(o, part));
  }
  for (uint32_t k = 0; windowed && k < held.groups; ++k) {
    StorePart part;
    const Options o = group_options(k, part, LayerKind::kSlidingWindow);
    KVTIER_TRY(add(o, part));
  }
  if (rank.state_layers > 0) {
    // Each rank keeps its own state (how a recurrent layer's state splits over ranks is the
    // model's): a state is found by ranks of the TP size that saved it.
    StorePart part;
    Options o = options;
    KVTIER_ASSIGN_OR_RETURN(o.geometry, state_geometry(rank));
    o.compression = Compression::kOff;  // a state is not 16-bit KV words
    bounds(o, part, state_split);
    part.kind = 3;
    part.dir_name = fmt::format("kvtier2/{}/s{}of{}", dir, rank.tp_rank, rank.tp_world);
    part.namespace_part = fmt::format("{}/kind3", model_text);
    KVTIER_TRY(add(o, part));
  }
  const char* kinds_of_store =
      rank.hybrid() ? "stores: head groups, layer kinds and state" : "head-group stores";
  IoSettings& shown = parts[0]->io_settings_;
  if (tuned) {
    // The rank's staging, and the tuning's whole it is a share of.
    shown = io;
    share_tuned_settings(shown, rank_stores);
  } else if (rank_stores > 1) {
    if (!io.source.empty()) {
      shown = io;  // the defaults a tuning fell back to
    } else {
      shown.source = options.io_request_bytes != 0 || options.staging_bytes != 0 ? "options"
                     : sizes_asked                                               ? "environment"
                                   : "defaults (tuning off)";
    }
    shown.staging_bytes = io.staging_bytes;
    shown.request_bytes = each.request_bytes;
    shown.source +=
        fmt::format(" (staging split over {} {}{})", rank_stores, kinds_of_store,
                    each.request_bytes < io.request_bytes
                        ? fmt::format(", in requests of {}: one of {} each would "
                                      "pass it",
                                      size_text(each.request_bytes), size_text(io.request_bytes))
                        : "");
  }
  return parts;
}

std::unique_ptr<Engine::Impl> open_format1_beside(const Options& options) {
  const KvGeometry& rank = options.geometry;
  // Format 1 keeps neither a latent nor a hybrid model, nor ranks replicating a head.
  if (options.store_format != 2 || rank.kv_tensors != 2 || rank.hybrid() ||
      (rank.kv_heads_total != 0 && rank.kv_heads_total != rank.kv_heads * rank.tp_world)) {
    return nullptr;
  }
  // Most TP-free stores have none beside them: looked for before an engine (staging and all) is
  // made to open one.
  const std::string rank_dir = fmt::format("rank{}of{}", rank.tp_rank, rank.tp_world);
  if (!on_a_drive(drive_roots(options), rank_dir)) return nullptr;
  Options o = options;
  o.store_format = 1;
  o.compression = Compression::kOff;  // format 1 stores every record raw
  o.geometry.kv_heads_total = 0;
  o.read_only = true;
  o.remote = {};
  StorePart part;
  part.no_dram = true;
  auto impl = Engine::Impl::create(o, part);
  if (!impl) {
    if (impl.error().code() != ErrorCode::kNotFound) {
      const Logger log(options.log_sink, options.log_level.value_or(LogLevel::kWarn));
      KVTIER_LOG(log, kWarn,
                 "a format-1 store of rank {} of TP {} lies beside this TP-free store but cannot "
                 "be read, so it is not served: {}",
                 rank.tp_rank, rank.tp_world, impl.error().message());
    }
    return nullptr;
  }
  KVTIER_LOG((*impl)->log_, kWarn,
             "{} is a format-1 store (one per TP rank): served read-only beside the TP-free store "
             "(kvtier2/), by ranks of TP {} only; new saves go to the TP-free store. Its records "
             "hold keys, not tokens, and cannot be rewritten as format 2: its sessions move as "
             "they are saved again; remove it when it is no longer needed",
             (*impl)->store_dir_, rank.tp_world);
  return std::move(*impl);
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
