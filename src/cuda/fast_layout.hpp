// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The kernels' address math: payload vectors to target addresses through kv_address_by() (the
// host's own placement, device/kv_layout.hpp) with divisions by multiply and shift.
// Host-compilable, so a CPU test checks it against kv_address() for every layout.
#pragma once

#include <cstdint>

#include "cuda/fast_div.hpp"
#include "device/kv_layout.hpp"

namespace kvtier::cuda {

/// kv_address_by()'s divisions as multiply and shift: tokens and 16-byte columns of a target of
/// fewer than 2^31 tokens (CudaDevice checks the shape) fit 32 bits.
struct FastDivide {
  FastDiv block_size;
  FastDiv head_vectors;  // head_bytes / 16
  KVTIER_HD uint64_t block_of(uint64_t token) const {
    return block_size.div(static_cast<uint32_t>(token));
  }
  KVTIER_HD uint64_t head_of(uint64_t col) const {
    return head_vectors.div(static_cast<uint32_t>(col / 16));
  }
};

/// What the fast kernels need to place 16-byte vectors of a record's payload.
struct FastLayout {
  KvLayoutParams p;
  FastDiv vectors_per_row;  // row_bytes / 16
  FastDiv layers;
  FastDiv block_size;
  FastDiv head_vectors;  // head_bytes / 16

  explicit FastLayout(const KvLayoutParams& params)
      : p(params),
        vectors_per_row(static_cast<uint32_t>(params.row_bytes / 16)),
        layers(params.layers),
        block_size(params.block_size == 0 ? 1 : params.block_size),
        head_vectors(params.head_bytes / 16) {}

  /// Address of payload vector `v` (16-byte units from the payload start) of a record of `tokens`
  /// tokens whose first is `first_token`: kv_address_by() (device/kv_layout.hpp), the host's own
  /// placement, with the divisions done by multiply and shift. Null for a skipped block.
  KVTIER_HD uint8_t* address(uint32_t v, uint32_t first_token, const FastDiv& tokens) const {
    const uint32_t row = vectors_per_row.div(v);
    const uint32_t col_vec = v - row * vectors_per_row.d;
    const uint32_t block = tokens.div(row);
    const uint32_t token = first_token + (row - block * tokens.d);
    const uint32_t kv = layers.div(block);
    const uint32_t layer = block - kv * layers.d;
    return kv_address_by(p, FastDivide{block_size, head_vectors}, kv, layer, token,
                         uint64_t{col_vec} * 16);
  }
};

}  // namespace kvtier::cuda
