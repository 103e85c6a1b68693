// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where each byte of a record's payload lands in the caller's KV memory, for every supported
// layout. Compiled by both the host compiler and nvcc (C++17 there: nothing newer here): the
// host-emulated device and the CUDA kernels call the same kv_address_by(), so the two cannot
// disagree about a layout.
#pragma once

#include <cstdint>

// A function both compilers build: for the host and the device under nvcc, a plain inline one
// under g++ (which knows no __host__ or __device__).
#if defined(__CUDACC__)
#define KVTIER_HD __host__ __device__ __forceinline__
#else
#define KVTIER_HD inline
#endif

namespace kvtier {

enum class KvForm : uint32_t {
  kContiguous = 0,         ///< [2, layers, capacity, row]
  kPagedKvFirst = 1,       ///< per layer [2, num_blocks, block_size, heads, head_dim]
  kPagedBlockFirst = 2,    ///< per layer [num_blocks, 2, block_size, heads, head_dim]
  kPagedPackedHeads = 3,   ///< per layer [num_blocks, heads, block_size, 2 * head_dim]
  kPagedPackedTokens = 4,  ///< per layer [num_blocks, block_size, heads, 2 * head_dim]
};

/// Plain data describing one KV target; pointers are in the target's address space (host memory
/// for the host device, device memory for the CUDA kernels).
struct KvLayoutParams {
  KvForm form = KvForm::kContiguous;
  uint32_t layers = 0;
  uint32_t kv_tensors = 2;  // 2: K and V; 1: a latent (MLA)
  uint32_t heads = 0;       // heads of a target row
  uint32_t head_bytes = 0;  // head_dim * element_bytes
  uint64_t row_bytes = 0;   // a payload row: the record's heads * head_bytes
  // A record holding some of the target's heads (a head group of a TP-free store): a target row
  // is target_row_bytes wide (0: row_bytes, the record holds every head) and the record's heads
  // start col_offset bytes into it.
  uint64_t target_row_bytes = 0;
  uint64_t col_offset = 0;
  uint64_t capacity_tokens = 0;          // tokens the target holds
  uint8_t* base = nullptr;               // contiguous form
  uint8_t* const* layer_base = nullptr;  // paged forms: one tensor per layer
  const int32_t* block_table = nullptr;  // paged forms: block of each block_size tokens
  // Paged forms: entries from one layer's table to the next's (layers with tables of their own,
  // each table_stride long); 0: one table serves every layer.
  uint64_t table_stride = 0;
  uint32_t block_size = 0;
  uint32_t num_blocks = 0;
};

/// Whether a form interleaves K and V per head (K then V in one 2 * head_dim run).
KVTIER_HD bool packs_kv(const KvLayoutParams& p) {
  return p.form == KvForm::kPagedPackedHeads || p.form == KvForm::kPagedPackedTokens;
}

/// Bytes of a row of the target (all its heads).
KVTIER_HD uint64_t target_row(const KvLayoutParams& p) {
  return p.target_row_bytes != 0 ? p.target_row_bytes : p.row_bytes;
}

/// Bytes that sit next to each other in the target starting at a payload row boundary: a whole
/// payload row (the record's heads are adjacent in a target row), or one head's slice of it in the
/// packed layouts.
KVTIER_HD uint64_t contiguous_run(const KvLayoutParams& p) {
  return packs_kv(p) ? p.head_bytes : p.row_bytes;
}

/// The divisions the placement below needs, by plain division (the host). The kernels pass their
/// own (multiply-and-shift by a divisor fixed per launch, same quotients) to the same formulas.
struct PlainDivide {
  uint64_t block_size;
  uint64_t head_bytes;
  KVTIER_HD uint64_t block_of(uint64_t token) const { return token / block_size; }
  KVTIER_HD uint64_t head_of(uint64_t col) const { return col / head_bytes; }
};

/// Address of byte `payload_col` of a payload row of (`kv`, `layer`, `token`) (byte col_offset +
/// payload_col of the target's row), the divisions done by `div`
/// (`block_of(token)`: token / block_size; `head_of(col)`: col / head_bytes); null where the block
/// table skips the token (a negative entry: restores only). The one statement of every layout's
/// placement: the host device and the CUDA kernels both use it.
template <typename Divide>
KVTIER_HD uint8_t* kv_address_by(const KvLayoutParams& p, const Divide& div, uint32_t kv,
                                 uint32_t layer, uint64_t token, uint64_t payload_col) {
  const uint64_t col = payload_col + p.col_offset;
  const uint64_t row = target_row(p);
  if (p.form == KvForm::kContiguous) {
    return p.base + (((uint64_t{kv} * p.layers + layer) * p.capacity_tokens + token) * row + col);
  }
  const uint64_t index = div.block_of(token);
  const int32_t entry = p.block_table[layer * p.table_stride + index];
  if (entry < 0) return nullptr;
  const uint64_t block = static_cast<uint64_t>(entry);
  const uint64_t in = token - index * p.block_size;
  uint8_t* layer_base = p.layer_base[layer];
  switch (p.form) {
    case KvForm::kPagedKvFirst:
      return layer_base + (((uint64_t{kv} * p.num_blocks + block) * p.block_size + in) * row + col);
    case KvForm::kPagedBlockFirst:
      return layer_base + (((block * p.kv_tensors + kv) * p.block_size + in) * row + col);
    case KvForm::kPagedPackedHeads: {
      const uint64_t head = div.head_of(col);
      const uint64_t within = col - head * p.head_bytes;
      return layer_base + (((block * p.heads + head) * p.block_size + in) * 2 * p.head_bytes +
                           uint64_t{kv} * p.head_bytes + within);
    }
    case KvForm::kPagedPackedTokens: {
      const uint64_t head = div.head_of(col);
      const uint64_t within = col - head * p.head_bytes;
      return layer_base + (((block * p.block_size + in) * p.heads + head) * 2 * p.head_bytes +
                           uint64_t{kv} * p.head_bytes + within);
    }
    case KvForm::kContiguous:
      break;
  }
  return nullptr;
}

/// kv_address_by() with plain division.
KVTIER_HD uint8_t* kv_address(const KvLayoutParams& p, uint32_t kv, uint32_t layer, uint64_t token,
                              uint64_t col) {
  return kv_address_by(p, PlainDivide{p.block_size, p.head_bytes}, kv, layer, token, col);
}

/// Payload bytes of one record that sit in one staging piece.
struct PieceSpan {
  uint64_t piece_offset = 0;    ///< where they start in the piece
  uint64_t payload_offset = 0;  ///< where they start in the record's payload
  uint64_t bytes = 0;
  uint64_t first_token = 0;  ///< the record's first token in the session
  uint32_t token_count = 0;  ///< tokens in the record
  uint32_t record = 0;       ///< the record's index in the operation (its checksum slot)
};

/// Position of payload byte `q` of a record of `count` tokens: (kv, layer, token within the
/// record, byte within the row). The payload is [kv_tensors, layers, count, row].
struct PayloadPos {
  uint32_t kv;
  uint32_t layer;
  uint64_t token;
  uint64_t col;
};

KVTIER_HD PayloadPos payload_pos(const KvLayoutParams& p, uint64_t count, uint64_t q) {
  const uint64_t block_bytes = count * p.row_bytes;
  const uint64_t b = q / block_bytes;
  const uint64_t within = q % block_bytes;
  return {static_cast<uint32_t>(b / p.layers), static_cast<uint32_t>(b % p.layers),
          within / p.row_bytes, within % p.row_bytes};
}

}  // namespace kvtier
