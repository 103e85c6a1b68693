// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Chained prefix keys. Defined in docs/format.md ("Keys").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/geometry.hpp"
#include "kvtier/kv_view.hpp"

namespace kvtier {

/// A 128-bit key. Plain data; stored little-endian on disk.
struct Key128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Key128&) const = default;
  [[nodiscard]] std::string hex() const;
};

struct Key128Hash {
  size_t operator()(const Key128& k) const noexcept {
    return static_cast<size_t>(k.lo ^ (k.hi * 31));
  }
};

/// Namespace of a rank's keys: XXH3-128 of the geometry's text form (model, shape, chunk size,
/// TP rank and world) and the tenant salt. Two namespaces never share a key chain.
/// `version` 2: a TP-free store's (its geometry a head group's), never equal to a format-1 key.
Key128 namespace_key(const KvGeometry& geometry, std::string_view tenant, uint32_t version = 1,
                     std::string_view part = {});

/// Key of a chunk: XXH3-128 over the parent key (16 bytes) followed by the chunk's token ids.
/// The first chunk's parent is the namespace key.
Key128 chunk_key(const Key128& parent, std::span<const Token> chunk_tokens);

/// chunk_key(parent, chunk_tokens.first(n)) for every n from 1 to chunk_tokens.size(), in one
/// pass over them: the keys of every record a save ending inside that chunk may have written.
std::vector<Key128> chunk_prefix_keys(const Key128& parent, std::span<const Token> chunk_tokens);

/// Keys of every chunk of `tokens`, in order: full chunks, then the trailing partial chunk if any.
std::vector<Key128> chain_keys(const Key128& ns, std::span<const Token> tokens,
                               uint32_t chunk_tokens);

}  // namespace kvtier
