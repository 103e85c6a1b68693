// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "synthetic.hpp"

#include "synthetic_rows.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

namespace kvtier::synthetic {
namespace {

// Writes (or, with `check`, compares) the row of one token in one (K|V, layer) block.
bool row(std::byte* dst, uint64_t bytes, uint64_t seed, uint64_t first, bool check) {
  uint64_t words[64];
  for (uint64_t done = 0; done < bytes; done += sizeof(words)) {
    const uint64_t n = std::min<uint64_t>(sizeof(words), bytes - done);
    for (uint64_t i = 0; i < (n + 7) / 8; ++i) words[i] = row_word(seed, first + done / 8 + i);
    if (check) {
      if (std::memcmp(dst + done, words, n) != 0) return false;
    } else {
      std::memcpy(dst + done, words, n);
    }
  }
  return true;
}

}  // namespace

uint64_t first_word(const KvGeometry& g) {
  const uint64_t heads = g.total_kv_heads();
  // Ranks split the heads evenly, or replicate them where there are more ranks than heads. Written
  // apart from the store's rank_heads (src/common/head_groups.hpp), as the bench's addressing is
  // apart from kvtier's: a mapping bug there shows as a mismatch instead of cancelling out.
  const uint64_t first_head =
      g.tp_world <= heads ? g.tp_rank * (heads / g.tp_world) : g.tp_rank * heads / g.tp_world;
  return first_head * g.head_dim * g.element_bytes / 8;
}

void parallel_tokens(uint64_t n, const std::function<void(uint64_t, uint64_t)>& fn) {
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  const uint64_t step = (n + threads - 1) / threads;
  for (unsigned t = 0; t < threads; ++t) {
    const uint64_t first = t * step;
    const uint64_t last = std::min(n, first + step);
    if (first < last) pool.emplace_back([&fn, first, last] { fn(first, last); });
  }
  for (auto& th : pool) th.join();
}

std::vector<Token> tokens(uint64_t seed, uint64_t count) {
  std::vector<Token> out(count);
  for (uint64_t i = 0; i < count; ++i)
    out[i] = static_cast<Token>(mix64(seed * 0x2545f4914f6cdd1dULL + i) % 151936);
  return out;
}

void fill_kv(const KvGeometry& g, std::span<const Token> tokens, std::span<std::byte> kv,
             uint64_t capacity_tokens) {
  const uint64_t rb = g.row_bytes();
  const uint64_t word = first_word(g);
  parallel_tokens(tokens.size(), [&](uint64_t first, uint64_t last) {
    for (uint64_t b = 0; b < uint64_t{g.kv_tensors} * g.layers; ++b) {
      for (uint64_t t = first; t < last; ++t) {
        row(kv.data() + (b * capacity_tokens + t) * rb, rb, row_seed(tokens[t], t, b), word, false);
      }
    }
  });
}

uint64_t first_mismatch(const KvGeometry& g, std::span<const Token> tokens,
                        std::span<const std::byte> kv, uint64_t capacity_tokens) {
  const uint64_t rb = g.row_bytes();
  const uint64_t word = first_word(g);
  std::mutex mu;
  uint64_t result = tokens.size();
  parallel_tokens(tokens.size(), [&](uint64_t first, uint64_t last) {
    uint64_t bad = tokens.size();
    for (uint64_t b = 0; b < uint64_t{g.kv_tensors} * g.layers; ++b) {
      for (uint64_t t = first; t < std::min(last, bad); ++t) {
        auto* p = const_cast<std::byte*>(kv.data() + (b * capacity_tokens + t) * rb);
        if (!row(p, rb, row_seed(tokens[t], t, b), word, true)) bad = t;
      }
    }
    std::lock_guard lock(mu);
    result = std::min(result, bad);
  });
  return result;
}

}  // namespace kvtier::synthetic
