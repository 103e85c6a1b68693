// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Checks a caller's KV memory against the geometry and describes it as a KvMemory.
#include <span>
#include <string_view>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"
#include "store/record_v2.hpp"

namespace kvtier {
namespace {

/// The caller's rows hold `memory` (a rank's heads); a record's rows hold `records`' heads from
/// head `first_head` on.
KvLayoutParams base_params(const KvGeometry& memory, const KvGeometry& records,
                           uint32_t first_head) {
  KvLayoutParams p;
  p.layers = records.layers;  // the caller's, or those of one kind (a hybrid model's part)
  p.kv_tensors = memory.kv_tensors;
  p.heads = memory.kv_heads;
  p.head_bytes = memory.head_dim * memory.element_bytes;
  p.row_bytes = records.row_bytes();
  if (records.kv_heads != memory.kv_heads) {
    p.target_row_bytes = memory.row_bytes();
    p.col_offset = uint64_t{first_head} * p.head_bytes;
  }
  return p;
}

/// Checks `views` (one per layer, layer l `bytes(l)` long, all in one place) and takes their bases
/// into `t`; `what` names them, `need(l)` says why `bytes(l)`.
template <typename Bytes, typename Need>
Status take_layers(std::span<const MemoryView> views, Bytes bytes, std::string_view what, Need need,
                   KvMemory& t) {
  t.kind = views[0].kind;
  t.device = views[0].device;
  for (size_t l = 0; l < views.size(); ++l) {
    const MemoryView& m = views[l];
    KVTIER_EXPECTS(m.data != nullptr, fmt::format("{}: layer {} is a null pointer", what, l));
    KVTIER_EXPECTS(m.kind == t.kind && m.device == t.device,
                   fmt::format("{}: layer {} lives elsewhere than layer 0", what, l));
    KVTIER_EXPECTS(m.size == bytes(l),
                   fmt::format("{}: layer {} holds {} bytes; {}", what, l, m.size, need(l)));
    t.layer_base.push_back(reinterpret_cast<uint8_t*>(m.data));
  }
  return {};
}

KvForm form_of(PagedLayout layout) {
  switch (layout) {
    case PagedLayout::kKvFirst:
      return KvForm::kPagedKvFirst;
    case PagedLayout::kBlockFirst:
      return KvForm::kPagedBlockFirst;
    case PagedLayout::kPackedHeads:
      return KvForm::kPagedPackedHeads;
    case PagedLayout::kPackedTokens:
      return KvForm::kPagedPackedTokens;
  }
  return KvForm::kPagedKvFirst;
}

}  // namespace

KvGeometry Engine::Impl::memory_geometry() const {
  KvGeometry g = options_.geometry;
  if (part_.memory_heads != 0) g.kv_heads = part_.memory_heads;
  if (part_.memory_layers != 0) g.layers = part_.memory_layers;
  return g;
}

Result<KvMemory> Engine::Impl::kv_memory_of(const ChunkedKv& kv, bool /*restore*/) const {
  const KvGeometry g = memory_geometry();
  KVTIER_EXPECTS(kv.memory.data != nullptr, "KV memory: null pointer");
  if (kv.memory.size != g.bytes_for_tokens(kv.capacity_tokens)) {
    return fail(
        ErrorCode::kInvalidArgument,
        fmt::format(
            "KV memory: {} bytes do not hold [{}, {}, {}, {}] of {}-byte elements ({} bytes)",
            kv.memory.size, g.kv_tensors, g.layers, kv.capacity_tokens, g.kv_heads * g.head_dim,
            g.element_bytes, g.bytes_for_tokens(kv.capacity_tokens)));
  }
  KVTIER_ASSIGN_OR_RETURN(Device * device, kit_->device_for(kv.memory.kind));
  KVTIER_TRY(device->check_memory(kv.memory));
  KvMemory t;
  t.params = base_params(g, options_.geometry, part_.first_head);
  t.params.form = KvForm::kContiguous;
  t.params.capacity_tokens = kv.capacity_tokens;
  t.params.base = reinterpret_cast<uint8_t*>(kv.memory.data);
  if (!part_.layers.empty()) {
    // Some of the layers (a hybrid model's of one kind): the contiguous form seen as a paged one
    // with a tensor per layer, block_size the capacity and as many blocks as layers, so that
    // layer l's K (block 0) and V (block `layers`, kv_tensors x blocks x block_size rows on) sit
    // exactly where the contiguous form has them.
    KVTIER_EXPECTS(kv.capacity_tokens > 0 && kv.capacity_tokens < (uint64_t{1} << 31),
                   "KV memory of a hybrid model: capacity must be in 1..2^31-1 tokens");
    t.params.form = KvForm::kPagedKvFirst;
    t.params.block_size = static_cast<uint32_t>(kv.capacity_tokens);
    t.params.num_blocks = g.layers;
    t.block_table = {0};
    const uint64_t layer_bytes = kv.capacity_tokens * g.row_bytes();
    for (uint32_t l : part_.layers) t.layer_base.push_back(t.params.base + l * layer_bytes);
    t.params.base = nullptr;
  }
  t.kind = kv.memory.kind;
  t.device = kv.memory.device;
  t.stream = kv.cuda_stream;
  KVTIER_TRY(device->check_shape(t.params));
  return t;
}

std::span<const int32_t> layer_block_table(const PagedKv& kv, uint32_t layer) {
  return layer < kv.layer_block_tables.size() && !kv.layer_block_tables[layer].empty()
             ? kv.layer_block_tables[layer]
             : kv.block_table;
}

Result<KvMemory> Engine::Impl::kv_memory_of(const PagedKv& kv, bool restore) const {
  const KvGeometry g = memory_geometry();
  KVTIER_EXPECTS(
      kv.layers.size() == g.layers,
      fmt::format("paged KV: {} layer tensors for a {}-layer model", kv.layers.size(), g.layers));
  KVTIER_EXPECTS(kv.block_size > 0 && kv.block_size <= 65536,
                 "paged KV: block_size must be in 1..65536");
  KVTIER_EXPECTS(kv.layer_num_blocks.empty() || kv.layer_num_blocks.size() == g.layers,
                 fmt::format("paged KV: {} layer block counts for {} layer tensors (one each, or "
                             "none: num_blocks counts every layer's)",
                             kv.layer_num_blocks.size(), g.layers));
  const auto blocks_of = [&](size_t l) {
    return kv.layer_num_blocks.empty() ? kv.num_blocks : kv.layer_num_blocks[l];
  };
  for (uint32_t l = 0; l < g.layers; ++l) {
    KVTIER_EXPECTS(blocks_of(l) > 0, fmt::format("paged KV: layer {} has 0 blocks", l));
  }
  KVTIER_EXPECTS(g.kv_tensors == 2 || kv.layout == PagedLayout::kKvFirst ||
                     kv.layout == PagedLayout::kBlockFirst,
                 "paged KV: a latent (kv_tensors 1) has no K and V to pack; its layout is kv_first "
                 "([num_blocks, block_size, head_dim], vLLM's MLA cache) or block_first");
  const auto layer_bytes = [&](size_t l) {
    return uint64_t{blocks_of(l)} * g.kv_tensors * kv.block_size * g.row_bytes();
  };
  KvMemory t;
  KVTIER_TRY(take_layers(
      kv.layers, layer_bytes, "paged KV",
      [&](size_t l) {
        return fmt::format("{} blocks of {} tokens need {}", blocks_of(l), kv.block_size,
                           layer_bytes(l));
      },
      t));
  // The caller's layers this part's records hold, in order, each with its block table; one
  // block count among them (the layout's addresses of a part's layers share it).
  std::vector<uint32_t> mine = part_.layers;
  if (mine.empty()) {
    for (uint32_t l = 0; l < g.layers; ++l) mine.push_back(l);
  }
  const uint32_t part_blocks = blocks_of(mine.front());
  for (uint32_t l : mine) {
    KVTIER_EXPECTS(blocks_of(l) == part_blocks,
                   fmt::format("paged KV: layers {} and {} are kept together but have {} and {} "
                               "blocks",
                               mine.front(), l, part_blocks, blocks_of(l)));
  }
  KVTIER_EXPECTS(kv.layer_block_tables.empty() || kv.layer_block_tables.size() == g.layers,
                 fmt::format("paged KV: {} layer block tables for {} layer tensors (one each, or "
                             "none: block_table serves every layer)",
                             kv.layer_block_tables.size(), g.layers));
  // A sliding-window part's save reads only records whose tokens every table holds
  // (hybrid_save): its layers may have left the caller's window.
  const bool may_skip = restore || part_.kind == static_cast<uint32_t>(RecordKind::kSlidingWindow);
  bool own_tables = false;
  for (uint32_t l : mine) {
    const std::span<const int32_t> table = layer_block_table(kv, l);
    own_tables = own_tables || table.data() != kv.block_table.data();
    KVTIER_EXPECTS(table.size() == kv.block_table.size(),
                   fmt::format("paged KV: layer {}'s block table has {} entries, block_table {}", l,
                               table.size(), kv.block_table.size()));
    for (size_t i = 0; i < table.size(); ++i) {
      const int32_t b = table[i];
      if (b == kSkipBlock) {
        KVTIER_EXPECTS(
            may_skip,
            fmt::format("paged KV: block_table[{}] skips its tokens (-1), which only a restore "
                        "(or a sliding-window layer's save) may do: a save needs every token's KV",
                        i));
        continue;
      }
      KVTIER_EXPECTS(b >= 0 && static_cast<uint32_t>(b) < part_blocks,
                     fmt::format("paged KV: layer {}'s block_table[{}] = {} is not a block of "
                                 "0..{} (or -1 to skip, on restore)",
                                 l, i, b, part_blocks - 1));
    }
  }
  {
    std::vector<uint8_t*> all = std::move(t.layer_base);
    t.layer_base.clear();
    for (uint32_t l : mine) t.layer_base.push_back(all[l]);
  }
  if (own_tables) {
    for (uint32_t l : mine) {
      const std::span<const int32_t> table = layer_block_table(kv, l);
      t.block_table.insert(t.block_table.end(), table.begin(), table.end());
    }
  } else {
    t.block_table.assign(kv.block_table.begin(), kv.block_table.end());
  }
  KVTIER_ASSIGN_OR_RETURN(Device * device, kit_->device_for(t.kind));
  for (const MemoryView& m : kv.layers) KVTIER_TRY(device->check_memory(m));
  t.params = base_params(g, options_.geometry, part_.first_head);
  t.params.form = form_of(kv.layout);
  t.params.table_stride = own_tables ? kv.block_table.size() : 0;
  t.params.capacity_tokens = kv.block_table.size() * uint64_t{kv.block_size};
  t.params.block_size = kv.block_size;
  t.params.num_blocks = part_blocks;
  t.stream = kv.cuda_stream;
  KVTIER_TRY(device->check_shape(t.params));
  return t;
}

Result<KvMemory> Engine::Impl::state_memory_of(const StateMemory& state) const {
  // The state part's geometry holds a layer's state as one chunk of rows (state_geometry() in
  // head_group_stores.cpp).
  const KvGeometry& g = options_.geometry;
  const uint64_t layer_bytes = uint64_t{g.chunk_tokens} * g.row_bytes();
  KVTIER_EXPECTS(
      state.layers.size() == g.layers,
      fmt::format("state memory: {} views for {} recurrent layers", state.layers.size(), g.layers));
  KvMemory t;
  KVTIER_TRY(take_layers(
      state.layers, [&](size_t) { return layer_bytes; }, "state memory",
      [&](size_t) { return fmt::format("a recurrent layer's state is {} bytes", layer_bytes); },
      t));
  KVTIER_ASSIGN_OR_RETURN(Device * device, kit_->device_for(t.kind));
  for (const MemoryView& m : state.layers) KVTIER_TRY(device->check_memory(m));
  t.block_table = {0};
  t.params = base_params(g, g, 0);
  t.params.form = KvForm::kPagedKvFirst;
  t.params.capacity_tokens = g.chunk_tokens;
  t.params.block_size = g.chunk_tokens;
  t.params.num_blocks = 1;
  t.stream = state.cuda_stream;
  KVTIER_TRY(device->check_shape(t.params));
  return t;
}

}  // namespace kvtier
