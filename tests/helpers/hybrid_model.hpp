// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Hybrid models for tests: full-attention and sliding-window layers and recurrent state drawn at
// random, a session's KV and every rank's state drawn at random, each rank's share saved through
// an engine and restored with every byte compared, as are the bytes a restore must leave alone
// (window layers' tokens before the window).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kvtier/kvtier.hpp"
#include "paged_reference.hpp"
#include "tp_reference.hpp"

namespace kvtier::testing {

constexpr std::byte kUntouched{0xEE};

struct Hybrid {
  uint32_t heads = 0;  ///< KV heads of the model
  std::vector<LayerKind> kinds;
  uint32_t head_dim = 0;
  uint32_t chunk = 0;
  uint32_t window = 0;
  uint32_t window_chunk = 0;  ///< tokens per window record; 0: chunk
  uint32_t state_layers = 0;
  /// A recurrent layer's state over the whole model: a rank of TP t holds 1/t of it (as a Mamba
  /// layer's heads split over ranks).
  uint64_t state_bytes = 0;
  uint32_t max_tp = 8;

  [[nodiscard]] uint32_t layers() const { return static_cast<uint32_t>(kinds.size()); }
  [[nodiscard]] uint64_t head_bytes() const { return uint64_t{head_dim} * 2; }
  [[nodiscard]] uint32_t window_records() const { return window_chunk != 0 ? window_chunk : chunk; }
  [[nodiscard]] KvGeometry rank(uint32_t r, uint32_t tp) const {
    KvGeometry g;
    g.model_id = "hybrid-test";
    g.layers = layers();
    g.kv_heads = std::max(1u, heads / tp);
    g.head_dim = head_dim;
    g.element_bytes = 2;
    g.chunk_tokens = chunk;
    g.tp_rank = r;
    g.tp_world = tp;
    g.kv_heads_total = heads;
    g.layer_kinds = kinds;
    g.window_tokens = window;
    g.window_chunk_tokens = window_chunk;
    g.state_layers = state_layers;
    g.state_bytes = state_bytes / tp;
    return g;
  }
  [[nodiscard]] std::vector<uint32_t> tp_sizes() const { return testing::tp_sizes(heads, max_tp); }
  [[nodiscard]] uint32_t first_head(uint32_t r, uint32_t tp) const {
    return testing::first_head(heads, r, tp);
  }
  /// The first token a restore of a prefix of `end` tokens writes in a sliding-window layer: the
  /// start of the record holding end - W + 1, the first token a continuation attends to.
  [[nodiscard]] uint64_t window_start(uint64_t end) const {
    return (end + 1 > window ? end + 1 - window : 0) / window_records() * window_records();
  }
};

/// A session's KV and state, as every rank of a TP size holds them.
struct HybridSession {
  std::vector<Token> tokens;
  std::vector<std::byte> kv;  ///< the model's: [2, layers, tokens, heads, head_dim]
  /// Per TP size and rank: [state_layers][state_bytes] (each rank's state is its own).
  std::vector<std::vector<std::byte>> states;
};

inline std::vector<std::byte> random_bytes(uint64_t n, std::mt19937_64& rng) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

inline std::vector<std::byte> rank_kv(const Hybrid& m, const std::vector<std::byte>& whole,
                                      uint64_t n, uint32_t r, uint32_t tp) {
  const uint64_t rank_row = std::max(1u, m.heads / tp) * m.head_bytes();
  const uint64_t row = m.heads * m.head_bytes(), first = m.first_head(r, tp) * m.head_bytes();
  std::vector<std::byte> out(2 * m.layers() * n * rank_row);
  for (uint64_t line = 0; line < 2 * m.layers() * n; ++line)
    std::memcpy(out.data() + line * rank_row, whole.data() + line * row + first, rank_row);
  return out;
}

/// `bytes` as the state of a rank of TP `tp`.
inline StateMemory state_view(std::vector<std::byte>& bytes, const Hybrid& m, uint32_t tp = 1) {
  StateMemory s;
  const uint64_t each = m.state_bytes / tp;
  for (uint32_t l = 0; l < m.state_layers; ++l)
    s.layers.push_back({bytes.data() + l * each, each, MemoryKind::kHost, 0});
  return s;
}

/// A restore of a hit at `hit` tokens into `got` ([2, layers, len, row], filled with kUntouched
/// first) against `want` ([2, layers, n, row], the truth of the same first tokens): rows of
/// full-attention layers before `hit` and of window layers from the window's record on must be
/// the truth; every other row must be untouched (those past the hit only where
/// `untouched_past_the_hit`: a restore that fell back to a shorter boundary leaves them
/// unspecified).
inline void expect_rows(const Hybrid& m, uint64_t row, const std::vector<std::byte>& got,
                        uint64_t len, const std::vector<std::byte>& want, uint64_t n, uint64_t hit,
                        bool untouched_past_the_hit = true) {
  const uint64_t from = m.window_start(hit);
  uint64_t wrong = 0, touched = 0;
  for (uint32_t k = 0; k < 2; ++k) {
    for (uint32_t l = 0; l < m.layers(); ++l) {
      const bool windowed = m.kinds[l] == LayerKind::kSlidingWindow;
      for (uint64_t t = 0; t < len; ++t) {
        const uint64_t at = ((uint64_t{k} * m.layers() + l) * len + t) * row;
        if (t >= hit && !untouched_past_the_hit) continue;
        if (t >= hit || (windowed && t < from)) {
          touched += std::any_of(got.begin() + at, got.begin() + at + row,
                                 [](std::byte b) { return b != kUntouched; });
        } else {
          const uint64_t was = ((uint64_t{k} * m.layers() + l) * n + t) * row;
          wrong += std::memcmp(got.data() + at, want.data() + was, row) != 0;
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0u) << "rows restored with other bytes (hit " << hit << " of " << len << ")";
  EXPECT_EQ(touched, 0u) << "rows outside the hit's KV written (hit " << hit << ")";
}

/// Saves rank r of TP `tp`'s share of `s` (its heads of the KV, its state) through `e`.
inline void save_rank(Engine& e, const Hybrid& m, const HybridSession& s, uint32_t r, uint32_t tp) {
  const uint64_t n = s.tokens.size();
  std::vector<std::byte> kv = rank_kv(m, s.kv, n, r, tp);
  const ChunkedKv source{{kv.data(), kv.size(), MemoryKind::kHost, 0}, n};
  std::vector<std::byte> state = s.states[r];
  auto saved = m.state_layers > 0 ? e.save(s.tokens, source, state_view(state, m, tp))
                                  : e.save(s.tokens, source);
  ASSERT_TRUE(saved) << saved.error().message();
  EXPECT_EQ(saved->tokens_stored, n);
}

/// Looks `s` up and restores it through `e` as rank r of TP `tp`, contiguous or paged at random,
/// expecting a hit of `want_tokens` (0 or a boundary up to all of it), and compares: full-attention
/// layers hold every token of the hit, window layers the tokens from the window's chunk on and
/// nothing before it, the state `want_state` (null: the rank's state in `s`).
inline void restore_rank(Engine& e, const Hybrid& m, const HybridSession& s, uint32_t r,
                         uint32_t tp, uint64_t want_tokens, std::mt19937_64& rng,
                         const std::vector<std::byte>* want_state = nullptr) {
  const uint64_t n = s.tokens.size();
  auto held = e.lookup(s.tokens);
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_EQ(*held, want_tokens);
  const KvGeometry g = m.rank(r, tp);
  std::vector<std::byte> got(g.bytes_for_tokens(n), kUntouched);
  std::vector<std::byte> state(uint64_t{m.state_layers} * m.state_bytes / tp, kUntouched);
  const StateMemory sv = state_view(state, m, tp);
  const bool paged = rng() % 2 == 0;
  Result<RestoreResult> restored = RestoreResult{};
  if (!paged) {
    const ChunkedKv dest{{got.data(), got.size(), MemoryKind::kHost, 0}, n};
    restored = m.state_layers > 0 ? e.restore(s.tokens, dest, sv) : e.restore(s.tokens, dest);
  } else {
    const auto layout = static_cast<PagedLayout>(rng() % 4);
    const uint32_t block_size = 1 + static_cast<uint32_t>(rng() % 16);
    const uint32_t blocks = static_cast<uint32_t>((n + block_size - 1) / block_size) + 2;
    PagedHost host(g, blocks, block_size, layout);
    const std::vector<int32_t> table = shuffled_blocks(n, block_size, blocks, rng());
    host.view.block_table = table;
    restored =
        m.state_layers > 0 ? e.restore(s.tokens, host.view, sv) : e.restore(s.tokens, host.view);
    move_all(g, host, table, got.data(), n, n, /*to_paged=*/false);
  }
  ASSERT_TRUE(restored) << restored.error().message();
  EXPECT_EQ(restored->tokens_restored, want_tokens) << restored->problem;
  if (want_tokens == 0) return;
  expect_rows(m, g.row_bytes(), got, n, rank_kv(m, s.kv, n, r, tp), n, want_tokens);
  if (m.state_layers > 0) {
    EXPECT_TRUE(state == (want_state != nullptr ? *want_state : s.states[r]))
        << "state restored with other bytes";
  }
}

inline Hybrid draw_model(std::mt19937_64& rng) {
  const uint32_t kHeads[] = {1, 2, 4, 6, 8};
  Hybrid m;
  m.heads = kHeads[rng() % std::size(kHeads)];
  m.head_dim = 8 * (1 + static_cast<uint32_t>(rng() % 3));
  m.chunk = 4 + static_cast<uint32_t>(rng() % 13);
  m.max_tp = rng() % 4 == 0 ? 4 : 8;
  const uint32_t layers = 1 + static_cast<uint32_t>(rng() % 5);
  for (uint32_t l = 0; l < layers; ++l)
    m.kinds.push_back(rng() % 2 == 0 ? LayerKind::kSlidingWindow : LayerKind::kFullAttention);
  m.kinds[rng() % layers] = LayerKind::kFullAttention;
  if (std::count(m.kinds.begin(), m.kinds.end(), LayerKind::kSlidingWindow) > 0) {
    m.window = 1 + static_cast<uint32_t>(rng() % (3 * m.chunk));
    // Window records as long as a chunk, or any divisor of it.
    std::vector<uint32_t> divisors;
    for (uint32_t d = 1; d <= m.chunk; ++d) {
      if (m.chunk % d == 0) divisors.push_back(d);
    }
    if (rng() % 2 == 0) m.window_chunk = divisors[rng() % divisors.size()];
  }
  if (rng() % 2 != 0) {
    m.state_layers = 1 + static_cast<uint32_t>(rng() % 3);
    m.state_bytes = 64 * (1 + rng() % 100);  // whole 8-byte words on every rank up to TP 8
  }
  if (m.window == 0 && m.state_layers == 0) {  // hybrid, at least
    m.state_layers = 1;
    m.state_bytes = 64;
  }
  return m;
}

inline HybridSession draw_session(const Hybrid& m, uint32_t tp, std::mt19937_64& rng) {
  HybridSession s;
  const uint64_t n = 1 + rng() % (6 * m.chunk);
  s.tokens.resize(n);
  for (auto& t : s.tokens) t = static_cast<Token>(rng() % 50000);
  s.kv = random_bytes(2 * m.layers() * n * m.heads * m.head_bytes(), rng);
  for (uint32_t r = 0; r < tp; ++r)
    s.states.push_back(random_bytes(uint64_t{m.state_layers} * m.state_bytes / tp, rng));
  return s;
}

}  // namespace kvtier::testing
