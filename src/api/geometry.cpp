// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kvtier/geometry.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier {

uint64_t KvGeometry::row_bytes() const { return uint64_t{kv_heads} * head_dim * element_bytes; }

uint64_t KvGeometry::bytes_per_token() const { return uint64_t{kv_tensors} * layers * row_bytes(); }

uint64_t KvGeometry::bytes_for_tokens(uint64_t tokens) const { return tokens * bytes_per_token(); }

Status KvGeometry::validate() const {
  if (model_id.empty()) return {ErrorCode::kInvalidArgument, "geometry: empty model id"};
  if (model_id.size() > 64)
    return {ErrorCode::kInvalidArgument, "geometry: model id over 64 bytes"};
  // Bounds keep every product below 2^63 for sessions of up to 2^31 tokens.
  if (layers == 0 || layers > 1024) {
    return {ErrorCode::kInvalidArgument, fmt::format("geometry: layers {} not in 1..1024", layers)};
  }
  if (kv_heads == 0 || kv_heads > 1024) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: kv_heads {} not in 1..1024", kv_heads)};
  }
  if (head_dim == 0 || head_dim > 4096) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: head_dim {} not in 1..4096", head_dim)};
  }
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: element_bytes {} is not 1, 2 or 4", element_bytes)};
  }
  if (chunk_tokens == 0 || chunk_tokens > 65536) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: chunk_tokens {} not in 1..65536", chunk_tokens)};
  }
  if (tp_world == 0 || tp_world > 1024 || tp_rank >= tp_world) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: tp_rank {} / tp_world {} invalid", tp_rank, tp_world)};
  }
  if (kv_heads_total != 0 && kv_heads_total != kv_heads * tp_world &&
      !(kv_heads == 1 && tp_world % kv_heads_total == 0)) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: kv_heads_total {} is neither kv_heads x tp_world ({} x {}) nor "
                        "a divisor of tp_world with one head per rank (ranks replicating heads)",
                        kv_heads_total, kv_heads, tp_world)};
  }
  if (kv_tensors != 1 && kv_tensors != 2) {
    return {
        ErrorCode::kInvalidArgument,
        fmt::format("geometry: kv_tensors {} is not 2 (K and V) or 1 (MLA's latent)", kv_tensors)};
  }
  if (kv_tensors == 1 && (kv_heads != 1 || kv_heads_total > 1)) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: a latent (kv_tensors 1) is one head on every rank, not {} of {}",
                        kv_heads, kv_heads_total)};
  }
  if (!layer_kinds.empty() && layer_kinds.size() != layers) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: {} layer kinds for {} KV layers (one each, or none: every layer "
                        "full attention)",
                        layer_kinds.size(), layers)};
  }
  for (size_t l = 0; l < layer_kinds.size(); ++l) {
    if (layer_kinds[l] != LayerKind::kFullAttention && layer_kinds[l] != LayerKind::kSlidingWindow)
      return {ErrorCode::kInvalidArgument, fmt::format("geometry: layer {}'s kind is unknown", l)};
  }
  if (layers_of(LayerKind::kFullAttention) == 0) {
    return {ErrorCode::kInvalidArgument,
            "geometry: no full-attention layer (a model of sliding-window layers only keeps no "
            "prefix a restore could start from)"};
  }
  const bool windowed = layers_of(LayerKind::kSlidingWindow) > 0;
  if (windowed != (window_tokens > 0) || window_tokens > (1u << 24)) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: window_tokens {} {}", window_tokens,
                        windowed ? "must be in 1..16777216 for the sliding-window layers"
                                 : "given, but no layer is a sliding-window layer")};
  }
  if (window_chunk_tokens != 0 && (!windowed || window_chunk_tokens > chunk_tokens ||
                                   chunk_tokens % window_chunk_tokens != 0)) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: window_chunk_tokens {} {}", window_chunk_tokens,
                        windowed ? fmt::format("must divide chunk_tokens ({})", chunk_tokens)
                                 : "given, but no layer is a sliding-window layer")};
  }
  if ((state_layers > 0) != (state_bytes > 0) || state_layers > 1024 ||
      state_bytes > (uint64_t{256} << 20) || state_bytes % 8 != 0) {
    // 256 MiB: a state store holds a layer's state in at most 65536 rows of at most 4 KiB.
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: {} recurrent layers of {} state bytes each: both or neither "
                        "must be given, at most 1024 layers of at most 256 MiB, in whole 8-byte "
                        "words",
                        state_layers, state_bytes)};
  }
  if (uint64_t{state_layers} * state_bytes > (uint64_t{4} << 30)) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: the state of {} recurrent layers of {} bytes would weigh over "
                        "4 GiB",
                        state_layers, state_bytes)};
  }
  if (row_bytes() % 8 != 0) {
    // Payload checksums sum 8-byte words; each (K|V, layer) block must hold whole words.
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: a row of {} bytes (kv_heads x head_dim x element_bytes) is not "
                        "a multiple of 8",
                        row_bytes())};
  }
  if (bytes_for_tokens(chunk_tokens) > (uint64_t{4} << 30)) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("geometry: one chunk would weigh {} bytes (limit 4 GiB)",
                        bytes_for_tokens(chunk_tokens))};
  }
  return {};
}

uint32_t KvGeometry::layers_of(LayerKind kind) const {
  if (layer_kinds.empty()) return kind == LayerKind::kFullAttention ? layers : 0;
  return static_cast<uint32_t>(std::count(layer_kinds.begin(), layer_kinds.end(), kind));
}

uint32_t KvGeometry::window_chunk() const {
  return window_chunk_tokens != 0 ? window_chunk_tokens : chunk_tokens;
}

bool KvGeometry::hybrid() const {
  return layers_of(LayerKind::kSlidingWindow) > 0 || state_layers > 0;
}

uint32_t KvGeometry::total_kv_heads() const {
  if (kv_tensors == 1) return 1;  // one latent, which every rank holds
  return kv_heads_total != 0 ? kv_heads_total : kv_heads * tp_world;
}

std::string KvGeometry::describe() const {
  std::string text =
      fmt::format("{}/L{}/H{}/D{}/E{}/C{}/tp{}of{}{}", model_id, layers, kv_heads, head_dim,
                  element_bytes, chunk_tokens, tp_rank, tp_world, kv_tensors == 1 ? "/T1" : "");
  if (hybrid()) {
    text += "/K";
    for (LayerKind k : layer_kinds) text += k == LayerKind::kSlidingWindow ? 'w' : 'f';
    text += fmt::format("/W{}/S{}x{}", window_tokens, state_layers, state_bytes);
    // Window records of another size are other records: a store of each.
    if (window_chunk() != chunk_tokens) text += fmt::format("/w{}", window_chunk());
  }
  return text;
}

const std::vector<ModelPreset>& model_presets() {
  // Shapes from each model's published config.json (num_hidden_layers, num_key_value_heads,
  // head_dim); KV in bf16.
  static const std::vector<ModelPreset> presets = {
      {"qwen3-coder-30b-a3b", 48, 4, 128, 2},
      {"llama-3-8b", 32, 8, 128, 2},
      {"llama-3-70b", 80, 8, 128, 2},
      {"qwen3-8b", 36, 8, 128, 2},
      // MLA: kv_lora_rank 512 + qk_rope_head_dim 64 elements of latent per token and layer.
      {"deepseek-v3", 61, 1, 576, 2, 1},
      // A tiny shape for tests and quick runs on small machines.
      {"tiny", 2, 2, 64, 2},
  };
  return presets;
}

Result<KvGeometry> geometry_for(std::string_view preset, uint32_t tp_rank, uint32_t tp_world,
                                uint32_t chunk_tokens) {
  for (const ModelPreset& p : model_presets()) {
    if (p.name != preset) continue;
    if (p.kv_tensors == 1) {  // every rank holds the whole latent
      KvGeometry g{std::string(p.name), p.layers,     1,       p.head_dim,
                   p.element_bytes,     chunk_tokens, tp_rank, tp_world};
      g.kv_heads_total = 1;
      g.kv_tensors = 1;
      KVTIER_TRY(g.validate());
      return g;
    }
    if (tp_world == 0 || p.kv_heads_total % tp_world != 0) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} has {} KV heads: tensor-parallel size {} does not divide them",
                              preset, p.kv_heads_total, tp_world));
    }
    KvGeometry g{std::string(p.name),
                 p.layers,
                 p.kv_heads_total / tp_world,
                 p.head_dim,
                 p.element_bytes,
                 chunk_tokens,
                 tp_rank,
                 tp_world};
    KVTIER_TRY(g.validate());
    return g;
  }
  std::string names;
  for (const ModelPreset& p : model_presets()) names += fmt::format(" {}", p.name);
  return fail(ErrorCode::kInvalidArgument,
              fmt::format("unknown model preset '{}'; known:{}", preset, names));
}

}  // namespace kvtier
