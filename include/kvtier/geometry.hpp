// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/export.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// @brief What one KV-holding layer of a hybrid model attends to.
enum class LayerKind : uint8_t {
  kFullAttention = 0,  ///< every token before it: a restore needs all of the prefix's KV
  kSlidingWindow = 1,  ///< the last KvGeometry::window_tokens tokens only
};

/// @brief Shape of the KV cache one rank stores: what a chunk of tokens weighs and how it is laid
/// out.
///
/// The contiguous chunk form of a KV tensor is `[2, layers, tokens, kv_heads * head_dim]` of
/// `element_bytes`-sized elements (K before V). `kv_heads` counts the heads held by this TP rank.
struct KVTIER_EXPORT KvGeometry {
  std::string model_id;         ///< Model name; part of every key's namespace.
  uint32_t layers = 0;          ///< Transformer layers holding KV.
  uint32_t kv_heads = 0;        ///< KV heads on this rank (total KV heads / tp_world).
  uint32_t head_dim = 0;        ///< Elements per head.
  uint32_t element_bytes = 2;   ///< Bytes per element (2 for bf16/fp16, 1 for fp8).
  uint32_t chunk_tokens = 256;  ///< Tokens per key: the granularity of prefix matching.
  uint32_t tp_rank = 0;         ///< Tensor-parallel rank this store belongs to.
  uint32_t tp_world = 1;        ///< Tensor-parallel world size.
  /// The model's KV heads over every rank; 0: kv_heads x tp_world. Read by TP-free stores
  /// (Options::store_format 2), which keep heads in groups that ranks of any TP size share.
  uint32_t kv_heads_total = 0;
  /// Tensors per token and layer: 2, K and V; 1, one latent (MLA: kv_heads 1, head_dim the
  /// latent's width, the same on every rank). A latent is stored by TP-free stores only.
  uint32_t kv_tensors = 2;

  // A hybrid model (docs/format.md "Hybrid models"; TP-free stores only). `layers` counts the
  // layers that hold KV; recurrent layers (Mamba, linear attention) hold a state instead.
  /// Kind of each of the `layers` KV layers, in model order; empty: every one full attention.
  std::vector<LayerKind> layer_kinds;
  /// Tokens a sliding-window layer's token attends to, itself included (the window W, as vLLM
  /// and Hugging Face count it): a continuation at token b needs the layer's KV of [b - W + 1, b).
  /// 0 without such layers.
  uint32_t window_tokens = 0;
  /// Tokens per sliding-window record; 0: chunk_tokens. A divisor of chunk_tokens: a serving
  /// engine that frees a window layer's blocks once they leave the window (vLLM's hybrid KV cache
  /// manager) sets its block size, so that the records a save keeps start where its blocks do.
  uint32_t window_chunk_tokens = 0;
  /// Recurrent layers, whose state at a chunk boundary replaces their KV.
  uint32_t state_layers = 0;
  /// Bytes of one recurrent layer's state on this rank (a multiple of 8, at most 256 MiB).
  uint64_t state_bytes = 0;

  /// Bytes of one token's row in one layer for K or V: kv_heads * head_dim * element_bytes.
  [[nodiscard]] uint64_t row_bytes() const;
  /// Bytes of KV one token carries on this rank: kv_tensors * layers * row_bytes().
  [[nodiscard]] uint64_t bytes_per_token() const;
  /// Bytes of a contiguous KV tensor holding `tokens` tokens.
  [[nodiscard]] uint64_t bytes_for_tokens(uint64_t tokens) const;
  /// KV layers of `kind` (every layer is full attention when layer_kinds is empty).
  [[nodiscard]] uint32_t layers_of(LayerKind kind) const;
  /// Tokens per sliding-window record: window_chunk_tokens, or chunk_tokens when that is 0.
  [[nodiscard]] uint32_t window_chunk() const;
  /// Whether the model has sliding-window or recurrent layers.
  [[nodiscard]] bool hybrid() const;
  /// kv_heads_total, or kv_heads x tp_world when it is 0.
  [[nodiscard]] uint32_t total_kv_heads() const;
  /// Checks every field is in range (non-zero, rank < world, sizes that do not overflow).
  [[nodiscard]] Status validate() const;
  /// A stable text form, e.g. "qwen3-coder-30b-a3b/L48/H2/D128/E2/C256/tp0of2" (a latent's adds
  /// "/T1", a hybrid model's its layer kinds, window and state), used in namespaces.
  [[nodiscard]] std::string describe() const;

  bool operator==(const KvGeometry&) const = default;
};

/// @brief A named model shape. `kv_heads_total` is split evenly across TP ranks; an MLA model's
/// latent (kv_tensors 1, one head) is held whole by every rank.
struct KVTIER_EXPORT ModelPreset {
  std::string_view name;
  uint32_t layers;
  uint32_t kv_heads_total;
  uint32_t head_dim;
  uint32_t element_bytes;
  uint32_t kv_tensors = 2;
};

/// @brief The built-in presets (qwen3-coder-30b-a3b, llama-3-8b, ...).
KVTIER_EXPORT const std::vector<ModelPreset>& model_presets();

/// @brief Geometry of `preset` for one rank of a TP group.
/// @return kInvalidArgument for an unknown preset or a world size that does not divide the heads
/// (an MLA preset takes any world size).
KVTIER_EXPORT Result<KvGeometry> geometry_for(std::string_view preset, uint32_t tp_rank = 0,
                                              uint32_t tp_world = 1, uint32_t chunk_tokens = 256);

}  // namespace kvtier
