// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where the seed benchmark's KV comes from in a file of forward-pass KV (`--kv file:PATH`,
// kv_source.hpp), shared by the host cache and the CUDA kernels so both write and check the same
// bytes.
//
// The file holds [2, L, T, H, D] elements (K then V, layer, token, head, dim); the model has any
// layers and heads of the same D, and a session any length. K or V `kv` of model head `head`
// (counted over the whole model, not a rank: every TP size sees the same bytes for a head) in
// layer `layer` at position t of the session `ids` is file[kv][layer % L][s][head % H], with
//
//   s      = (t mod T + offset) mod T
//   offset = mix64(mix64(mix64(ids[t - t mod T]) + t / T) + (layer / L) * 2^32 + head / H) mod T
//
// So each window of T positions is the file's tokens in order, rotated: a head's neighbouring
// tokens are the file's neighbours, as the structure a codec sees in real KV asks. The rotation
// depends on the id at the window's first position, which a restored prefix of the session
// holds too (the KV of position t is a function of ids[0..t] and t, as the synthetic KV's is,
// so first_mismatch is exact), and on the window and on which repeat of the file's layers and
// heads is read. Without the last two, position t and t + T, layer l and l + L, head h and h + H
// would hold equal bytes, and a restore that put one in the other's place would pass its check.
#pragma once

#include <cstdint>

#include "synthetic_rows.hpp"

namespace kvtier::seed {

/// A KV file's shape: [2, layers, tokens, heads, head_dim] elements of 2 bytes.
struct KvFileDims {
  uint32_t layers = 0;
  uint64_t tokens = 0;
  uint32_t heads = 0;
  uint32_t head_dim = 0;
};

/// The file token shown at position `t` of the session `ids` in model layer `layer`, model head
/// `head`.
KVTIER_SYNTH_FN uint64_t kv_file_token(const KvFileDims& f, const int32_t* ids, uint64_t t,
                                       uint32_t layer, uint32_t head) {
  const uint64_t window = t / f.tokens;
  const uint64_t anchor = static_cast<uint32_t>(ids[window * f.tokens]);
  const uint64_t repeat = (uint64_t{layer / f.layers} << 32) | (head / f.heads);
  const uint64_t offset =
      synthetic::mix64(synthetic::mix64(synthetic::mix64(anchor) + window) + repeat) % f.tokens;
  return (t % f.tokens + offset) % f.tokens;
}

/// Which of the file's heads (rows of head_dim elements, counted from the file's start) K or V
/// `kv` of model head `head` in model layer `layer` holds at position `t` of the session `ids`.
KVTIER_SYNTH_FN uint64_t kv_file_head(const KvFileDims& f, const int32_t* ids, uint32_t kv,
                                      uint64_t t, uint32_t layer, uint32_t head) {
  const uint64_t token = kv_file_token(f, ids, t, layer, head);
  return ((uint64_t{kv} * f.layers + layer % f.layers) * f.tokens + token) * f.heads +
         head % f.heads;
}

/// The same a word at a time, as the CUDA kernels read it: which of the file's 8-byte words word
/// `word` of the whole model's row of K or V `kv` in layer `layer` at position `t` holds. Heads
/// are whole words (BenchKv::create checks): 2-byte elements, 4 to a word.
KVTIER_SYNTH_FN uint64_t kv_file_word(const KvFileDims& f, const int32_t* ids, uint32_t kv,
                                      uint64_t t, uint32_t layer, uint64_t word) {
  const uint64_t head_words = f.head_dim / 4;
  const uint64_t head =
      kv_file_head(f, ids, kv, t, layer, static_cast<uint32_t>(word / head_words));
  return head * head_words + word % head_words;
}

}  // namespace kvtier::seed
