// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvtier {

using Token = int32_t;

/// @brief Where a buffer lives. Device memory is addressed by the device that owns it.
enum class MemoryKind : uint8_t {
  kHost,  ///< Host memory; also what the host-emulated device hands out.
  kCuda,  ///< CUDA device memory (used by the GPU data paths).
};

/// @brief A borrowed view of KV memory. kvtier never frees it.
struct MemoryView {
  std::byte* data = nullptr;
  uint64_t size = 0;
  MemoryKind kind = MemoryKind::kHost;
  int device = 0;  ///< CUDA ordinal when kind == kCuda.
};

/// @brief KV of a session in contiguous chunk form: `[2, layers, capacity_tokens, row]` where
/// row = kv_heads * head_dim elements. Token t of the session sits at index t on the token axis.
struct ChunkedKv {
  MemoryView memory;
  uint64_t capacity_tokens = 0;  ///< Length of the token axis; memory.size must match exactly.
  /// CUDA memory only: the stream (a cudaStream_t) on which the caller produced or last used this
  /// memory. kvtier's copies run on streams of its own; they start after the work queued on this
  /// stream before the call, so a save never reads KV a kernel is still writing and a restore's
  /// writes are not overwritten by a pending fill. Null: the legacy default stream, which orders
  /// after every blocking stream; work on a non-blocking stream (PyTorch's side streams, CuPy's
  /// streams) is ordered only when that stream is named here.
  void* cuda_stream = nullptr;
};

/// @brief Layouts of a serving engine's paged KV cache (one tensor per layer). Every layout holds
/// 2 x block_size x kv_heads x head_dim elements per block; they differ in order.
enum class PagedLayout : uint8_t {
  kKvFirst,      ///< [2, num_blocks, block_size, kv_heads, head_dim] (vLLM flash-attn).
  kBlockFirst,   ///< [num_blocks, 2, block_size, kv_heads, head_dim].
  kPackedHeads,  ///< [num_blocks, kv_heads, block_size, 2 * head_dim]: vLLM's packed K|V, HND.
  /// [num_blocks, block_size, kv_heads, 2 * head_dim]: vLLM's packed K|V in its default NHD order
  /// (vLLM 0.26's FlashAttention, FlashInfer and Triton backends allocate this).
  kPackedTokens,
};

/// Block-table entry meaning "leave these tokens alone" on restore: the serving engine already
/// holds them (e.g. its own prefix cache hit), possibly in blocks other requests are reading.
inline constexpr int32_t kSkipBlock = -1;

/// @brief A paged KV cache: one tensor per layer (each num_blocks blocks), and the blocks that hold
/// one session's tokens, in token order. kvtier borrows all of it for the duration of a call.
struct PagedKv {
  std::vector<MemoryView> layers;  ///< one per model layer, all of the same kind and device
  /// Block of tokens [i*block_size, (i+1)*block_size). A restore may name kSkipBlock: those tokens
  /// are read and verified like the rest but not written anywhere. A save may not.
  std::span<const int32_t> block_table;
  /// Layers whose blocks are other blocks (a serving engine that keeps each kind of layer in a
  /// block table of its own, as vLLM's hybrid KV cache manager does): empty, or one table per
  /// layer, an empty one meaning block_table. Each is as long as block_table. A sliding-window
  /// layer's table may name kSkipBlock in a save too: tokens whose KV the caller no longer holds
  /// (left the window); the save keeps only window records every one of whose tokens is held.
  std::vector<std::span<const int32_t>> layer_block_tables;
  uint32_t block_size = 16;  ///< tokens per block
  uint32_t num_blocks = 0;   ///< blocks in each layer's tensor
  /// Blocks in each layer's tensor where they differ (a caller that saves some layers from
  /// copies of the blocks it keeps, each with a block table of its own): empty, or one count per
  /// layer, num_blocks then unused. A hybrid model's layers of one kind must have one count.
  std::vector<uint32_t> layer_num_blocks;
  PagedLayout layout = PagedLayout::kKvFirst;
  void* cuda_stream = nullptr;  ///< as ChunkedKv::cuda_stream
};

/// @brief The recurrent state of a hybrid model's session (KvGeometry::state_layers): one view per
/// recurrent layer, each KvGeometry::state_bytes of this rank's state after the session's last
/// token (a save) or where a restore's prefix ends (a restore). How the bytes are laid out inside
/// a layer's view is the caller's: kvtier keeps them as they are.
struct StateMemory {
  std::vector<MemoryView> layers;
  void* cuda_stream = nullptr;  ///< as ChunkedKv::cuda_stream
};

}  // namespace kvtier
