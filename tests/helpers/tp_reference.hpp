// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Which TP sizes a TP-free store serves and which heads a rank holds, stated independently of
// src/common/head_groups.* for the tests to check the engine against.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kvtier/kvtier.hpp"

namespace kvtier::testing {

/// The TP sizes a TP-free store serves for a model of `heads` KV heads: powers of two dividing
/// max_tp whose ranks hold whole groups: up to the heads, dividing them and the groups; past the
/// heads, multiples of them when every group is one head (ranks then replicate heads).
inline std::vector<uint32_t> tp_sizes(uint32_t heads, uint32_t max_tp) {
  const uint32_t groups = std::gcd(heads, max_tp);
  std::vector<uint32_t> sizes;
  for (uint32_t t = 1; t <= max_tp; t *= 2) {
    if (t <= heads ? heads % t == 0 && groups % t == 0 : t % heads == 0 && groups == heads)
      sizes.push_back(t);
  }
  return sizes;
}

/// The first of the heads rank r of TP tp holds.
inline uint32_t first_head(uint32_t heads, uint32_t r, uint32_t tp) {
  return tp <= heads ? r * (heads / tp) : r * heads / tp;
}

/// Options of a TP-free store for tests: small I/O, no tuning, `capacity` per drive.
inline Options tp_free_options(const std::string& root, const KvGeometry& g, uint32_t max_tp,
                               uint64_t capacity) {
  Options o;
  o.root = root;
  o.geometry = g;
  o.store_format = 2;
  o.max_tp = max_tp;
  o.capacity_bytes = capacity;
  o.io_request_bytes = 64 << 10;
  o.staging_bytes = 256 << 10;
  o.tune = false;
  return o;
}

/// A model shape and a session: `heads` KV heads in all, `tokens` tokens.
struct TpModel {
  uint32_t heads = 0;
  uint32_t layers = 0;
  uint32_t head_dim = 0;
  uint32_t element_bytes = 2;
  uint32_t chunk = 0;
  uint32_t max_tp = 8;
  uint64_t tokens = 0;
  uint32_t kv_tensors = 2;  ///< 1: MLA's latent (one head, on every rank)

  [[nodiscard]] uint64_t head_bytes() const { return uint64_t{head_dim} * element_bytes; }
  [[nodiscard]] KvGeometry rank(uint32_t r, uint32_t tp) const {
    KvGeometry g;
    g.model_id = "tp-free-test";
    g.layers = layers;
    g.kv_heads = std::max(1u, heads / tp);  // more ranks than heads: one (replicated) head each
    g.head_dim = head_dim;
    g.element_bytes = element_bytes;
    g.chunk_tokens = chunk;
    g.tp_rank = r;
    g.tp_world = tp;
    g.kv_heads_total = heads;
    g.kv_tensors = kv_tensors;
    return g;
  }
  [[nodiscard]] std::vector<uint32_t> tp_sizes() const { return testing::tp_sizes(heads, max_tp); }
  [[nodiscard]] uint32_t first_head(uint32_t r, uint32_t tp) const {
    return testing::first_head(heads, r, tp);
  }
};

/// Rank r of TP tp's heads of `whole`: [2, layers, tokens, heads / tp (or 1), head_dim].
inline std::vector<std::byte> rank_slice(const TpModel& m, const std::vector<std::byte>& whole,
                                         uint32_t r, uint32_t tp) {
  const uint64_t rank_row = std::max(1u, m.heads / tp) * m.head_bytes();
  const uint64_t row = m.heads * m.head_bytes(), first = m.first_head(r, tp) * m.head_bytes();
  std::vector<std::byte> out(m.kv_tensors * m.layers * m.tokens * rank_row);
  for (uint64_t line = 0; line < m.kv_tensors * m.layers * m.tokens; ++line) {
    std::memcpy(out.data() + line * rank_row, whole.data() + line * row + first, rank_row);
  }
  return out;
}

/// `bytes` as contiguous KV of `tokens` tokens in host memory.
inline ChunkedKv host_kv(std::vector<std::byte>& bytes, uint64_t tokens) {
  return {{bytes.data(), bytes.size(), MemoryKind::kHost, 0}, tokens};
}

/// `n` consecutive token ids from `first` on.
inline std::vector<Token> token_run(uint64_t n, Token first) {
  std::vector<Token> tokens(n);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

}  // namespace kvtier::testing
