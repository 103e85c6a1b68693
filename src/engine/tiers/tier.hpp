// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The tier interface: where records are kept (the DRAM tier, the local drives, the cluster; next a
// compressed tier or an object store), each one implementation in this folder, registered once in
// tier_list.cpp. A restore asks the tiers in order for the chunks still missing; every byte goes
// through the one read route (engine/read_route.hpp). Records move between tiers (a save's
// write-through and write-behind, promotion) as verified record images a tier accepts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/read_route.hpp"
#include "kvtier/engine.hpp"

namespace kvtier {

class Tier;

/// What the tiers counted in one restore, added to the engine's counters when it ends.
struct RestoreTally {
  uint64_t dram_hits = 0, store_hits = 0, staging_bytes_read = 0, gds_restores = 0;
};

/// @brief One restore as the tiers see it: the chunks asked for, which are served (by whom), and
/// where the bytes go. Chunk c holds tokens [c * chunk, ...) (or from firsts[c], chunks named by
/// key); the local index's prefix `found` covers the first found.size() chunks. Used by one thread.
struct RestoreJob {
  RestoreJob(std::span<const Token> tokens_in, std::vector<Key128> keys_in,
             std::vector<LocatedRecord> found_in, const KvMemory& destination_in,
             RestoreResult& result_in)
      : tokens(tokens_in),
        keys(std::move(keys_in)),
        found(std::move(found_in)),
        destination(destination_in),
        result(result_in),
        state(keys.size(), RecordState::kIncomplete),
        tokens_served(keys.size(), 0),
        served_by(keys.size(), nullptr) {}

  /// Marks chunk c served by `tier` with `count` tokens (or, failed, no longer served).
  void serve(size_t c, RecordState s, uint32_t count, const Tier* tier) {
    state[c] = s;
    tokens_served[c] = s == RecordState::kIntact ? count : 0;
    served_by[c] = s == RecordState::kIntact ? tier : nullptr;
  }
  /// Chunk c's first token.
  [[nodiscard]] uint64_t first_token(size_t c, uint32_t chunk_tokens) const {
    return firsts.empty() ? c * uint64_t{chunk_tokens} : firsts[c];
  }
  /// Chunk c's token count: the chain's (a whole chunk, or what is left of `tokens`), or the
  /// one its ChunkRef names.
  [[nodiscard]] uint32_t chunk_size(size_t c, uint32_t chunk_tokens) const {
    if (!counts.empty()) return counts[c];
    return static_cast<uint32_t>(
        std::min<uint64_t>(chunk_tokens, tokens.size() - c * uint64_t{chunk_tokens}));
  }
  /// The chunks served from the first on, without a gap.
  [[nodiscard]] size_t served() const {
    size_t c = 0;
    while (c < state.size() && state[c] == RecordState::kIntact) ++c;
    return c;
  }

  std::span<const Token> tokens;
  const std::vector<Key128> keys;
  const std::vector<LocatedRecord> found;
  const KvMemory& destination;
  RestoreResult& result;
  /// Each chunk's first token and token count when the chunks are named by key (ChunkRef);
  /// empty: c * chunk, and a chain's chunk sizes.
  std::vector<uint64_t> firsts;
  std::vector<uint32_t> counts;
  std::vector<RecordState> state;  ///< per chunk; kCorrupt: every byte arrived and a check failed
  std::vector<uint32_t> tokens_served;
  std::vector<const Tier*> served_by;
  std::vector<Key128> corrupt;  ///< records of `found` found corrupt (and dropped) by a tier
  /// Whether records fetched from a lower tier are still moved into the one in front: not after
  /// one was dropped, since the chain there would have a gap.
  bool promoting = true;
  RestoreTally tally;
};

/// @brief A place records are kept. Thread-safe.
class Tier {
 public:
  virtual ~Tier() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Serves what it holds of the chunks `job` still lacks, reading them through `route` into
  /// job.destination and marking each (job.serve). Failures are misses, never wrong bytes; an
  /// error is returned only where the restore as a whole cannot go on.
  [[nodiscard]] virtual Status restore(RestoreJob& job, ReadRoute& route) = 0;
  /// Called at the end of a restore with how many chunks of its intact prefix this tier served.
  virtual void served_prefix(uint64_t /*chunks*/, RestoreTally& /*tally*/) {}
  /// Lookup: how many chunks from `first` on this tier holds past the local index (the local
  /// index answers for the tiers in front of it: 0).
  [[nodiscard]] virtual uint64_t held_run(std::span<const Token> /*tokens*/,
                                          std::span<const Key128> /*keys*/, size_t /*first*/) {
    return 0;
  }
  /// A save made `records` durable on the drives: a tier behind them takes its copy (the cluster's
  /// write-behind: read back through the read route, verified, then accepted). Never blocks.
  virtual void saved(std::span<const RecordMeta> /*records*/) {}
  /// Takes verified records moved here from another tier: `images[i]` is records[i]'s header
  /// block then payload. Returns how many it took (a tier may keep fewer: it is full, or holds
  /// them already).
  [[nodiscard]] virtual Result<uint64_t> accept(
      std::span<const RecordMeta> /*records*/,
      std::span<const std::span<const std::byte>> /*images*/) {
    return uint64_t{0};
  }
  /// Forgets `keys` (evict, or records found corrupt).
  virtual void erase(std::span<const Key128> /*keys*/) {}
};

}  // namespace kvtier
