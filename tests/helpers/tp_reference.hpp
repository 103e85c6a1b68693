// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Which TP sizes a TP-free store serves and which heads a rank holds, stated independently of
// src/common/head_groups.* for the tests to check the engine against.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kvtier/kvtier.hpp"

namespace kvtier::testing {

/// The TP sizes a TP-free store serves for a model of `heads` KV heads: powers of two dividing
/// max_tp whose ranks hold whole groups: up to the heads, dividing them and the groups; past the
/// heads, multiples of them when every group is one head (ranks then replicate heads).
inline std::vector<uint32_t> tp_sizes(uint32_t heads, uint32_t max_tp) {
  const uint32_t groups = std::gcd(heads, max_tp);
  std::vector<uint32_t> sizes;
  for (uint32_t t = 1; t <= max_tp; t *= 2) {
    if (t <= heads ? heads % t == 0 && groups % t == 0 : t % heads == 0 && groups == heads)
      sizes.push_back(t);
  }
  return sizes;
}

/// The first of the heads rank r of TP tp holds.
inline uint32_t first_head(uint32_t heads, uint32_t r, uint32_t tp) {
  return tp <= heads ? r * (heads / tp) : r * heads / tp;
}

/// Options of a TP-free store for tests: small I/O, no tuning, `capacity` per drive.
inline Options tp_free_options(const std::string& root, const KvGeometry& g, uint32_t max_tp,
                               uint64_t capacity) {
  Options o;
  o.root = root;
  o.geometry = g;
  o.store_format = 2;
  o.max_tp = max_tp;
  o.capacity_bytes = capacity;
  o.io_request_bytes = 64 << 10;
  o.staging_bytes = 256 << 10;
  o.tune = false;
  return o;
}

}  // namespace kvtier::testing
