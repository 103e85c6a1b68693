// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Synthetic sessions: token ids from a seed, KV bytes generated deterministically from the token
// ids (a stand-in for a model's prefill). Used by the CLI, the benchmarks and the tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kvtier/geometry.hpp"
#include "kvtier/kv_view.hpp"

namespace kvtier::synthetic {

/// A zero-filled host KV tensor in contiguous chunk form for `tokens` tokens.
struct HostKv {
  HostKv(const KvGeometry& g, uint64_t tokens)
      : bytes(g.bytes_for_tokens(tokens)),
        data(new std::byte[bytes]()),
        view{{data.get(), bytes}, tokens} {}
  [[nodiscard]] std::span<std::byte> span() const { return {data.get(), bytes}; }
  uint64_t bytes;
  std::unique_ptr<std::byte[]> data;
  ChunkedKv view;
};

/// Runs fn(first, last) over ranges of [0, n) on up to 16 threads (one per core).
void parallel_tokens(uint64_t n, const std::function<void(uint64_t first, uint64_t last)>& fn);

/// `count` token ids in [0, 151936) derived from `seed`.
std::vector<Token> tokens(uint64_t seed, uint64_t count);

/// Where a rank's row begins in the whole model's row, in 8-byte words: word w of a rank's row is
/// word first_word + w of the model's, so that ranks of any TP size see the same bytes for the
/// same head (a TP-free store restores at one TP size what another saved). Heads of a whole number
/// of words; 0 for a latent (MLA), which every rank holds whole.
uint64_t first_word(const KvGeometry& g);

/// Fills the contiguous KV tensor `kv` ([kv_tensors, layers, capacity, row]) for tokens[0..n):
/// every row's bytes depend on the token id, its position, K/V and the layer.
void fill_kv(const KvGeometry& g, std::span<const Token> tokens, std::span<std::byte> kv,
             uint64_t capacity_tokens);

/// Index of the first token of tokens[0..n) whose rows in `kv` differ from fill_kv's, or n.
uint64_t first_mismatch(const KvGeometry& g, std::span<const Token> tokens,
                        std::span<const std::byte> kv, uint64_t capacity_tokens);

}  // namespace kvtier::synthetic
