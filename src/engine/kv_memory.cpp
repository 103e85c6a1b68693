// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Checks a caller's KV memory against the geometry and describes it as a KvMemory.
#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {
namespace {

/// The caller's rows hold `memory` (a rank's heads); a record's rows hold `records`' heads from
/// head `first_head` on.
KvLayoutParams base_params(const KvGeometry& memory, const KvGeometry& records,
                           uint32_t first_head) {
  KvLayoutParams p;
  p.layers = memory.layers;
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
  t.kind = kv.memory.kind;
  t.device = kv.memory.device;
  t.stream = kv.cuda_stream;
  KVTIER_TRY(device->check_shape(t.params));
  return t;
}

Result<KvMemory> Engine::Impl::kv_memory_of(const PagedKv& kv, bool restore) const {
  const KvGeometry g = memory_geometry();
  KVTIER_EXPECTS(
      kv.layers.size() == g.layers,
      fmt::format("paged KV: {} layer tensors for a {}-layer model", kv.layers.size(), g.layers));
  KVTIER_EXPECTS(kv.block_size > 0 && kv.block_size <= 65536,
                 "paged KV: block_size must be in 1..65536");
  KVTIER_EXPECTS(kv.num_blocks > 0, "paged KV: num_blocks is 0");
  KVTIER_EXPECTS(g.kv_tensors == 2 || kv.layout == PagedLayout::kKvFirst ||
                     kv.layout == PagedLayout::kBlockFirst,
                 "paged KV: a latent (kv_tensors 1) has no K and V to pack; its layout is kv_first "
                 "([num_blocks, block_size, head_dim], vLLM's MLA cache) or block_first");
  const uint64_t layer_bytes =
      uint64_t{kv.num_blocks} * g.kv_tensors * kv.block_size * g.row_bytes();
  KvMemory t;
  t.kind = kv.layers[0].kind;
  t.device = kv.layers[0].device;
  for (size_t l = 0; l < kv.layers.size(); ++l) {
    const MemoryView& m = kv.layers[l];
    KVTIER_EXPECTS(m.data != nullptr, fmt::format("paged KV: layer {} is a null pointer", l));
    KVTIER_EXPECTS(m.kind == t.kind && m.device == t.device,
                   fmt::format("paged KV: layer {} lives elsewhere than layer 0", l));
    KVTIER_EXPECTS(m.size == layer_bytes,
                   fmt::format("paged KV: layer {} holds {} bytes; {} blocks of {} tokens need {}",
                               l, m.size, kv.num_blocks, kv.block_size, layer_bytes));
    t.layer_base.push_back(reinterpret_cast<uint8_t*>(m.data));
  }
  for (size_t i = 0; i < kv.block_table.size(); ++i) {
    const int32_t b = kv.block_table[i];
    if (b == kSkipBlock) {
      KVTIER_EXPECTS(
          restore,
          fmt::format("paged KV: block_table[{}] skips its tokens (-1), which only a restore "
                      "may do: a save needs every token's KV",
                      i));
      continue;
    }
    KVTIER_EXPECTS(
        b >= 0 && static_cast<uint32_t>(b) < kv.num_blocks,
        fmt::format(
            "paged KV: block_table[{}] = {} is not a block of 0..{} (or -1 to skip, on restore)", i,
            b, kv.num_blocks - 1));
  }
  KVTIER_ASSIGN_OR_RETURN(Device * device, kit_->device_for(t.kind));
  for (const MemoryView& m : kv.layers) KVTIER_TRY(device->check_memory(m));
  t.block_table.assign(kv.block_table.begin(), kv.block_table.end());
  t.params = base_params(g, options_.geometry, part_.first_head);
  t.params.form = form_of(kv.layout);
  t.params.capacity_tokens = kv.block_table.size() * uint64_t{kv.block_size};
  t.params.block_size = kv.block_size;
  t.params.num_blocks = kv.num_blocks;
  t.stream = kv.cuda_stream;
  KVTIER_TRY(device->check_shape(t.params));
  return t;
}

}  // namespace kvtier
