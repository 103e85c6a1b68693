// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>

#include "device/kv_layout.hpp"  // KVTIER_HD

namespace kvtier::cuda {

/// Division by a runtime constant as a multiply-high and a shift, valid for n < 2^31 and
/// 1 <= d < 2^31 (the round-up method of Granlund and Montgomery). The scatter kernel's address
/// math needs five divisions per 16-byte vector; 64-bit division would make it bound by integer
/// throughput instead of memory bandwidth.
struct FastDiv {
  uint32_t d = 1;
  uint32_t multiplier = 0;
  uint32_t shift = 0;

  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    if (d == 1) return;
    uint32_t log2_ceil = 0;
    while ((uint64_t{1} << log2_ceil) < d) ++log2_ceil;
    const uint32_t p = 31 + log2_ceil;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << p) + d - 1) / d);
    shift = p - 32;
  }

  KVTIER_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32);
#endif
    return d == 1 ? n : (high >> shift);
  }
};

}  // namespace kvtier::cuda
