// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A hybrid model's calls over its parts (docs/format.md "Hybrid models"): the head groups'
// full-attention stores, their sliding-window stores (kept only near each save's end) and the
// rank's recurrent-state store. A prefix is held only up to a boundary where all three are.
#pragma once

#include <span>
#include <vector>

#include "engine/parts.hpp"

namespace kvtier {

/// Saves `tokens`' KV into every part and, when `state` is given, the state at their end.
template <typename Kv>
Result<SaveResult> hybrid_save(const Parts& parts, const KvGeometry& model,
                               std::span<const Token> tokens, const Kv& source,
                               const StateMemory* state);

/// The longest prefix of `tokens` that ends at a boundary every part holds.
Result<uint64_t> hybrid_lookup(const Parts& parts, const KvGeometry& model,
                               std::span<const Token> tokens);

/// Restores that prefix: the full-attention KV of all of it, the sliding-window KV of its last
/// window, the state at its end. All or nothing: a part that fails makes it a miss (0 tokens).
template <typename Kv>
Result<RestoreResult> hybrid_restore(const Parts& parts, const KvGeometry& model,
                                     std::span<const Token> tokens, const Kv& destination,
                                     const StateMemory* state);

/// The records each part's restore of `tokens` would read from its drives (parts in order): what
/// the read ceiling and the file ranges for fio cover.
std::vector<std::vector<LocatedRecord>> hybrid_records(const Parts& parts, const KvGeometry& model,
                                                       std::span<const Token> tokens);

/// Drops every record of `tokens` from every part: their chunks' KV and any state at their ends.
Result<uint64_t> hybrid_evict(const Parts& parts, const KvGeometry& model,
                              std::span<const Token> tokens);

}  // namespace kvtier
