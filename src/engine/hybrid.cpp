// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/hybrid.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_set>

#include "common/keys.hpp"
#include "store/record_v2.hpp"

namespace kvtier {
namespace {

RecordKind kind_of(const Engine::Impl& part) { return static_cast<RecordKind>(part.part_.kind); }

/// The first sliding-window record a prefix of `end` tokens needs: the one holding token
/// end - W + 1 (a continuation's first token attends to itself and the W - 1 tokens before it).
size_t window_first_chunk(const KvGeometry& model, uint64_t end) {
  const uint64_t from = end + 1 > model.window_tokens ? end + 1 - model.window_tokens : 0;
  return from / model.window_chunk();
}

/// Tokens per record of part `p`'s chain: a window part's records are window_chunk() long; the
/// state part names a state by the model's chunks.
uint32_t chain_chunk(const Engine::Impl& p, const KvGeometry& model) {
  return kind_of(p) == RecordKind::kSlidingWindow ? model.window_chunk() : model.chunk_tokens;
}

/// Whether the caller still holds every token of `r` in every one of part `p`'s layers: a paged
/// cache's sliding-window layers may have let go of tokens that left the window (kSkipBlock).
bool rows_held(const Engine::Impl& /*p*/, const ChunkedKv& /*kv*/, const ChunkRef& /*r*/) {
  return true;
}

bool rows_held(const Engine::Impl& p, const PagedKv& kv, const ChunkRef& r) {
  if (r.tokens == 0 || kv.block_size == 0) return true;
  const uint64_t first = r.first / kv.block_size;
  const uint64_t last = (r.first + r.tokens - 1) / kv.block_size;
  for (uint32_t l : p.part_.layers) {
    const std::span<const int32_t> table = layer_block_table(kv, l);
    for (uint64_t i = first; i <= last && i < table.size(); ++i) {
      if (table[i] == kSkipBlock) return false;
    }
  }
  return true;
}

/// A part's chain of keys over a token list (its own namespace and record size): the records
/// of any prefix of it, hashing again only a last chunk that ends inside one of the list's.
class Chain {
 public:
  Chain(const Engine::Impl& part, std::span<const Token> tokens, uint32_t chunk)
      : ns_(part.namespace_),
        chunk_(chunk),
        tokens_(tokens),
        keys_(chain_keys(ns_, tokens, chunk)) {}

  /// Chunks [first, ceil(end / chunk)) of the prefix of `end` tokens (`end` up to the list's).
  [[nodiscard]] std::vector<ChunkRef> refs(size_t first, uint64_t end) const {
    const uint64_t whole = end / chunk_ * chunk_;
    if (end == whole || end == tokens_.size()) return chain_refs(ns_, keys_, chunk_, first, end);
    std::vector<ChunkRef> out = chain_refs(ns_, keys_, chunk_, first, whole);
    const Key128 parent = whole == 0 ? ns_ : keys_[whole / chunk_ - 1];
    out.push_back({chunk_key(parent, tokens_.subspan(whole, end - whole)), parent,
                   static_cast<uint32_t>(end - whole), whole});
    return out;
  }

  [[nodiscard]] std::span<const Key128> keys() const { return keys_; }

  /// The partial-chunk records after the whole-chunk boundary `at`, of 1 .. `count` tokens:
  /// every prefix of the chunk hashed in one pass.
  [[nodiscard]] std::vector<ChunkRef> partials(uint64_t at, uint64_t count) const {
    const Key128 parent = at == 0 ? ns_ : keys_[at / chunk_ - 1];
    std::vector<ChunkRef> out;
    uint32_t len = 0;
    for (const Key128& key : chunk_prefix_keys(parent, tokens_.subspan(at, count)))
      out.push_back({key, parent, ++len, at});
    return out;
  }

  /// The state record of the prefix of `end` tokens: named by that prefix's last key.
  [[nodiscard]] ChunkRef state(uint64_t end, uint32_t state_rows) const {
    const ChunkRef last = refs((end - 1) / chunk_, end).back();
    return {last.key, last.parent, state_rows, 0};
  }

 private:
  Key128 ns_;
  uint32_t chunk_;
  std::span<const Token> tokens_;
  std::vector<Key128> keys_;
};

uint32_t state_rows(const Engine::Impl& part) { return part.options_.geometry.chunk_tokens; }

/// The records window or state part `i` needs for a prefix of `end` tokens (`chains[i]`: its
/// chain over the tokens); none for a full-attention part.
std::vector<ChunkRef> boundary_refs(const Parts& parts, const std::vector<Chain>& chains,
                                    const KvGeometry& model, size_t i, uint64_t end) {
  switch (kind_of(*parts[i])) {
    case RecordKind::kSlidingWindow:
      return chains[i].refs(window_first_chunk(model, end), end);
    case RecordKind::kState:
      return {chains[i].state(end, state_rows(*parts[i]))};
    case RecordKind::kFullAttention:
      break;
  }
  return {};
}

/// Per part, the keys the cluster was found to hold (asked once for a lookup's candidates).
using ClusterHeld = std::vector<std::unordered_set<Key128, Key128Hash>>;

/// Whether every window and state part holds what a prefix of `end` tokens needs: in its store,
/// or (`cluster` given) in the cluster.
bool boundary_held(const Parts& parts, const std::vector<Chain>& chains, const KvGeometry& model,
                   uint64_t end, const ClusterHeld* cluster = nullptr) {
  for (size_t i = 0; i < parts.size(); ++i) {
    Engine::Impl& p = *parts[i];
    // restore_chunks serves a part's records from this node's tiers as a prefix only: from the
    // first one missing here on, the cluster serves every record, those held here too.
    bool gap = false;
    for (const ChunkRef& ref : boundary_refs(parts, chains, model, i, end)) {
      if (!gap && p.held_chunks(std::span(&ref, 1)) == 1) continue;
      gap = true;
      if (cluster == nullptr || !(*cluster)[i].contains(ref.key)) return false;
    }
  }
  return true;
}

/// The chunks part `p` reads for `prefix` (a held boundary): all of its chunks (full attention),
/// those from `window_first` on (sliding window), or the state record at its end.
std::vector<ChunkRef> part_refs(const Engine::Impl& p, const KvGeometry& model,
                                std::span<const Token> prefix, size_t window_first) {
  switch (kind_of(p)) {
    case RecordKind::kFullAttention:
      return p.chunk_refs(prefix);
    case RecordKind::kSlidingWindow:
      return p.chunk_refs(prefix, window_first);
    case RecordKind::kState:
      return {Chain(p, prefix, model.chunk_tokens).state(prefix.size(), state_rows(p))};
  }
  return {};
}

/// Each part's chain over `tokens` (a part's own namespace and record size): every key a hybrid
/// call needs of the list, hashed once.
std::vector<Chain> chains_over(const Parts& parts, const KvGeometry& model,
                               std::span<const Token> tokens) {
  std::vector<Chain> chains;
  chains.reserve(parts.size());
  for (const auto& part : parts) chains.emplace_back(*part, tokens, chain_chunk(*part, model));
  return chains;
}

/// The prefix of `tokens` every full-attention part holds locally, or (`reachable`) locally and
/// in the tiers behind (the cluster) (`chains`: chains_over()).
uint64_t full_prefix(const Parts& parts, std::span<const Token> tokens,
                     const std::vector<Chain>& chains, bool reachable) {
  uint64_t full = tokens.size();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (kind_of(*parts[i]) != RecordKind::kFullAttention) continue;
    uint64_t held = 0;
    if (reachable) {
      held = parts[i]->reachable_prefix(tokens, chains[i].keys());
    } else {
      for (const LocatedRecord& r : parts[i]->find_prefix(tokens, chains[i].keys()))
        held += r.meta.token_count;
    }
    full = std::min(full, held);
  }
  return full;
}

/// The ends of saves inside chunks of `tokens` that the first full-attention part holds: a
/// partial-chunk record after each of the boundaries `tokens` spans whole, ascending (a chunked
/// prefill's step ends, a turn's end that a longer session went past). `chains`: chains_over().
std::vector<uint64_t> inner_ends(const Parts& parts, const KvGeometry& model,
                                 std::span<const Token> tokens, const std::vector<Chain>& chains) {
  const uint64_t chunk = model.chunk_tokens;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (kind_of(*parts[i]) != RecordKind::kFullAttention) continue;
    // Every full-attention part of a save stores the same ends: the first one's name them.
    std::vector<uint64_t> ends;
    for (uint64_t b = 0; b < tokens.size(); b += chunk) {
      const std::vector<RecordMeta> partial = parts[i]->partial_chunks(tokens, chains[i].keys(), b);
      for (auto it = partial.rbegin(); it != partial.rend(); ++it)
        ends.push_back(b + it->token_count);
    }
    return ends;
  }
  return {};
}

/// The ends a prefix of `tokens` may be served at, longest first: the full-attention prefix
/// `full` (inside a chunk: where every full-attention part holds the record ending there), the
/// chunk boundaries below it and the ends of saves inside each chunk (a state is kept wherever a
/// save ended) whose partial records every full-attention part holds. Every key
/// is the chains' or one hash of a partial chunk: linear in the list and the ends inside it.
std::vector<uint64_t> candidate_ends(const Parts& parts, const KvGeometry& model,
                                     std::span<const Token> tokens,
                                     const std::vector<Chain>& chains, uint64_t full,
                                     bool use_cluster) {
  // A restore of the prefix of `end` tokens asks each group for the record that ends there: an
  // end inside a chunk counts only where every group holds that record, here or in the cluster.
  // The prefix every group reaches may end where one group holds the chunk only whole (another
  // save, or eviction, took the groups differently).
  auto ends_here = [&](uint64_t end) {
    for (size_t i = 0; i < parts.size(); ++i) {
      Engine::Impl& p = *parts[i];
      if (kind_of(p) != RecordKind::kFullAttention) continue;
      const ChunkRef last = chains[i].refs((end - 1) / model.chunk_tokens, end).back();
      if (p.held_chunks(std::span(&last, 1)) == 1) continue;
      if (!use_cluster || p.remote_ == nullptr || !p.remote_holds(std::span(&last, 1))[0])
        return false;
    }
    return true;
  };
  const uint64_t chunk = model.chunk_tokens;
  std::vector<uint64_t> inner = inner_ends(parts, model, tokens.first(full), chains);
  std::vector<uint64_t> ends;
  for (uint64_t end = full; end > 0;) {
    if (end % chunk == 0 || ends_here(end)) ends.push_back(end);  // only `full` can be inside
    const uint64_t below = (end - 1) / chunk * chunk;
    while (!inner.empty() && inner.back() > below) {
      const uint64_t at = inner.back();
      inner.pop_back();
      if (at < end && ends_here(at)) ends.push_back(at);
    }
    end = below;
  }
  return ends;
}

/// Where a save inside the chunk after `full` ended, as the cluster holds it: a session another
/// node saved ended mid-chunk and `tokens` go on past it another way (a continuation), so the
/// chains reach no further than `full`. Locally such ends are found by their records
/// (inner_ends); of the cluster, every length the chunk may hold is asked, in one batch, of the
/// first full-attention part's cluster, and the lengths it holds of the others'. An end counts
/// where every full-attention part holds its partial record. Longest first; none where a
/// full-attention part has no cluster tier.
std::vector<uint64_t> cluster_partial_ends(const Parts& parts, const KvGeometry& model,
                                           std::span<const Token> tokens,
                                           const std::vector<Chain>& chains, uint64_t full) {
  const uint64_t chunk = model.chunk_tokens;
  if (full % chunk != 0 || full >= tokens.size()) return {};
  // Lengths 1 .. last - 1: the chains asked for the whole `last` already.
  std::vector<uint64_t> lengths(std::min(chunk, tokens.size() - full) - 1);
  std::iota(lengths.begin(), lengths.end(), 1);
  const uint64_t longest = lengths.size();
  for (size_t i = 0; i < parts.size() && !lengths.empty(); ++i) {
    Engine::Impl& p = *parts[i];
    if (kind_of(p) != RecordKind::kFullAttention) continue;
    if (p.remote_ == nullptr) return {};
    const std::vector<ChunkRef> every = chains[i].partials(full, longest);
    std::vector<ChunkRef> refs;
    for (uint64_t len : lengths) refs.push_back(every[len - 1]);
    const std::vector<bool> held = p.remote_holds(refs);
    std::vector<uint64_t> kept;
    for (size_t j = 0; j < lengths.size(); ++j) {
      if (held[j] || p.held_chunks(std::span(&refs[j], 1)) == 1) kept.push_back(lengths[j]);
    }
    lengths = std::move(kept);
  }
  std::vector<uint64_t> ends;
  for (auto len = lengths.rbegin(); len != lengths.rend(); ++len) ends.push_back(full + *len);
  return ends;
}

/// The longest prefix whose full-attention KV every full-attention part can serve (from its
/// store or the cluster) and whose window and state records every other part holds, in its
/// store or, where it has a cluster tier, in the cluster (another node saved them). Without
/// `use_cluster`: what this node's own records serve.
uint64_t held_boundary(const Parts& parts, const KvGeometry& model, std::span<const Token> tokens,
                       bool use_cluster = true) {
  for (const auto& part : parts) part->follow_writer();
  const std::vector<Chain> chains = chains_over(parts, model, tokens);
  const uint64_t full = full_prefix(parts, tokens, chains, /*reachable=*/use_cluster);
  if (full == 0) return 0;
  const std::vector<uint64_t> ends =
      candidate_ends(parts, model, tokens, chains, full, use_cluster);
  // This node's own records first. The cluster is asked only about the ends above the longest
  // they serve (and those inside the chunk after `full`), for the window and state records of
  // them the stores lack.
  size_t above = 0;
  while (above < ends.size() && !boundary_held(parts, chains, model, ends[above])) ++above;
  const uint64_t local = above < ends.size() ? ends[above] : 0;
  if (!use_cluster) return local;
  std::vector<uint64_t> asked = cluster_partial_ends(parts, model, tokens, chains, full);
  asked.insert(asked.end(), ends.begin(), ends.begin() + static_cast<ptrdiff_t>(above));
  if (asked.empty()) return local;
  for (const auto& part : parts) {
    if (kind_of(*part) != RecordKind::kFullAttention && part->remote_ == nullptr) return local;
  }
  // Each window and state part's records of `end` from the first one this node lacks on
  // (boundary_held), none where it holds them all.
  auto lacking_of = [&](size_t i, uint64_t end) {
    std::vector<ChunkRef> refs = boundary_refs(parts, chains, model, i, end);
    const auto gap = std::find_if(refs.begin(), refs.end(), [&](const ChunkRef& r) {
      return parts[i]->held_chunks(std::span(&r, 1)) == 0;
    });
    refs.erase(refs.begin(), gap);
    return refs;
  };
  // One batch per part asks about `refs` (each key once); the keys held go into `cluster`.
  ClusterHeld cluster(parts.size());
  auto ask = [&](size_t i, const std::vector<ChunkRef>& refs) {
    std::vector<ChunkRef> batch;
    std::unordered_set<Key128, Key128Hash> seen;
    for (const ChunkRef& r : refs) {
      if (!cluster[i].contains(r.key) && seen.insert(r.key).second) batch.push_back(r);
    }
    const std::vector<bool> held = parts[i]->remote_holds(batch);
    for (size_t k = 0; k < batch.size(); ++k) {
      if (held[k]) cluster[i].insert(batch[k].key);
    }
  };
  // First only the last record each end needs of each part (its state, its window's last
  // record), the state parts first, each part asked only about the ends every part before it
  // passed. Window and state records are kept only near where saves ended, so few ends pass;
  // asking about every window record of every end instead costs thousands of keys on a long
  // prompt.
  std::vector<size_t> order;
  for (const RecordKind kind : {RecordKind::kState, RecordKind::kSlidingWindow}) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (kind_of(*parts[i]) == kind) order.push_back(i);
    }
  }
  std::vector<uint64_t> alive = asked;
  for (size_t i : order) {
    std::vector<ChunkRef> probes;
    std::vector<std::optional<Key128>> last;
    for (uint64_t end : alive) {
      const std::vector<ChunkRef> lacking = lacking_of(i, end);
      last.push_back(lacking.empty() ? std::nullopt : std::optional(lacking.back().key));
      if (!lacking.empty()) probes.push_back(lacking.back());
    }
    ask(i, probes);
    std::vector<uint64_t> passed;
    for (size_t e = 0; e < alive.size(); ++e) {
      if (!last[e] || cluster[i].contains(*last[e])) passed.push_back(alive[e]);
    }
    alive = std::move(passed);
    if (alive.empty()) return local;
  }
  // Then every earlier record the ends that passed lack.
  for (size_t i : order) {
    std::vector<ChunkRef> rest;
    for (uint64_t end : alive) {
      const std::vector<ChunkRef> lacking = lacking_of(i, end);
      rest.insert(rest.end(), lacking.begin(), lacking.end());
    }
    if (!rest.empty()) ask(i, rest);
  }
  for (uint64_t end : alive) {
    if (boundary_held(parts, chains, model, end, &cluster)) return end;
  }
  return local;
}

}  // namespace

template <typename Kv>
Result<SaveResult> hybrid_save(const Parts& parts, const KvGeometry& model,
                               std::span<const Token> tokens, const Kv& source,
                               const StateMemory* state) {
  KVTIER_EXPECTS(!tokens.empty(), "save: the token list is empty");
  const uint64_t n = tokens.size();
  // Window records from the last window before the session's last whole chunk: what a
  // continuation (which goes on from a whole chunk) or a repeat needs, and no more.
  const size_t window_first =
      window_first_chunk(model, n / model.chunk_tokens * model.chunk_tokens);
  // What a restore at the session's end needs of them.
  const uint64_t end_first = window_first_chunk(model, n) * uint64_t{model.window_chunk()};
  auto one = [&](Engine::Impl& p) -> Result<SaveResult> {
    switch (kind_of(p)) {
      case RecordKind::kFullAttention:
        return save_part(p, tokens, source);
      case RecordKind::kSlidingWindow: {
        const std::vector<ChunkRef> refs = p.chunk_refs(tokens, window_first);
        if (p.part_.follower) {
          p.follow_writer();
          return SaveResult{.tokens_stored = p.held_chunks(refs) == refs.size() ? n : 0};
        }
        // Records whose tokens the caller no longer holds are not kept (their bytes are no KV);
        // the session's end is stored only if what a restore there needs is held.
        std::vector<ChunkRef> kept;
        std::vector<ChunkRef> missing;
        for (const ChunkRef& r : refs) {
          if (rows_held(p, source, r)) {
            kept.push_back(r);
          } else if (r.first >= end_first) {
            missing.push_back(r);
          }
        }
        SaveResult r;
        if (!kept.empty()) {
          KVTIER_ASSIGN_OR_RETURN(KvMemory memory, p.kv_memory_of(source, /*restore=*/false));
          KVTIER_ASSIGN_OR_RETURN(r, p.save_chunks(kept, memory));
        }
        r.tokens_stored = p.held_chunks(missing) == missing.size() ? n : 0;
        return r;
      }
      case RecordKind::kState: {
        const ChunkRef ref = Chain(p, tokens, model.chunk_tokens).state(n, state_rows(p));
        if (state == nullptr) {
          return SaveResult{.tokens_stored = p.held_chunks(std::span(&ref, 1)) == 1 ? n : 0};
        }
        KVTIER_ASSIGN_OR_RETURN(KvMemory memory, p.state_memory_of(*state));
        KVTIER_ASSIGN_OR_RETURN(SaveResult r, p.save_chunks(std::span(&ref, 1), memory));
        r.tokens_stored = n;
        return r;
      }
    }
    return fail(ErrorCode::kInternal, "a part of an unknown kind");
  };
  return combine(each_part(parts, one));
}

Result<uint64_t> hybrid_lookup(const Parts& parts, const KvGeometry& model,
                               std::span<const Token> tokens) {
  return held_boundary(parts, model, tokens);
}

template <typename Kv>
Result<RestoreResult> hybrid_restore(const Parts& parts, const KvGeometry& model,
                                     std::span<const Token> tokens, const Kv& destination,
                                     const StateMemory* state) {
  KVTIER_EXPECTS(!tokens.empty(), "restore: the token list is empty");
  // The prefix of `end` tokens, all or nothing.
  auto restore_at = [&](uint64_t end) -> Result<RestoreResult> {
    const std::span<const Token> prefix = tokens.first(end);
    const size_t window_first = window_first_chunk(model, end);
    // What each kind of part must deliver for the prefix to be whole.
    auto expected = [&](const Engine::Impl& p) -> uint64_t {
      switch (kind_of(p)) {
        case RecordKind::kFullAttention:
          return end;
        case RecordKind::kSlidingWindow:
          return end - window_first * uint64_t{model.window_chunk()};
        case RecordKind::kState:
          return state_rows(p);
      }
      return 0;
    };
    auto one = [&](Engine::Impl& p) -> Result<RestoreResult> {
      switch (kind_of(p)) {
        case RecordKind::kFullAttention:  // through every tier, the cluster's included
          return on_kv_memory(
              p, destination, /*restore=*/true,
              [&](Engine::Impl& q, const KvMemory& t) { return q.restore(prefix, t); });
        case RecordKind::kSlidingWindow: {
          KVTIER_ASSIGN_OR_RETURN(KvMemory memory, p.kv_memory_of(destination, /*restore=*/true));
          return p.restore_chunks(part_refs(p, model, prefix, window_first), memory);
        }
        case RecordKind::kState: {
          KVTIER_ASSIGN_OR_RETURN(KvMemory memory, p.state_memory_of(*state));
          return p.restore_chunks(part_refs(p, model, prefix, window_first), memory);
        }
      }
      return fail(ErrorCode::kInternal, "a part of an unknown kind");
    };
    std::vector<Result<RestoreResult>> results = each_part(parts, one);
    bool whole = true;
    for (size_t i = 0; i < results.size(); ++i)
      whole = whole && results[i] && results[i]->tokens_restored == expected(*parts[i]);
    KVTIER_ASSIGN_OR_RETURN(RestoreResult all, combine(std::move(results)));
    all.tokens_restored = whole ? end : 0;
    if (!whole && all.problem.empty()) {
      all.problem = fmt::format(
          "hybrid model: the full-attention KV, the last window's KV and the state at {} tokens "
          "did not all restore; nothing was restored",
          end);
    }
    return all;
  };
  const uint64_t end = held_boundary(parts, model, tokens);
  if (end == 0) return RestoreResult{};
  KVTIER_ASSIGN_OR_RETURN(RestoreResult all, restore_at(end));
  if (all.tokens_restored != 0) return all;
  // A record the cluster served failed its check, or the cluster went away: this node's own
  // records may still serve a shorter boundary (the failed attempt's rows past it are left
  // unspecified, as a failed restore leaves them).
  const uint64_t own = held_boundary(parts, model, tokens, /*use_cluster=*/false);
  if (own == 0 || own >= end) return all;
  KVTIER_ASSIGN_OR_RETURN(RestoreResult local, restore_at(own));
  if (local.tokens_restored == 0) return all;
  local.problem =
      fmt::format("at {} tokens: {}; this node's own records served {}", end, all.problem, own);
  return local;
}

std::vector<std::vector<LocatedRecord>> hybrid_records(const Parts& parts, const KvGeometry& model,
                                                       std::span<const Token> tokens) {
  std::vector<std::vector<LocatedRecord>> out(parts.size());
  const uint64_t end = tokens.empty() ? 0 : held_boundary(parts, model, tokens);
  if (end == 0) return out;
  const std::span<const Token> prefix = tokens.first(end);
  const size_t window_first = window_first_chunk(model, end);
  for (size_t i = 0; i < parts.size(); ++i) {
    out[i] = parts[i]->held_records(part_refs(*parts[i], model, prefix, window_first));
  }
  return out;
}

Result<uint64_t> hybrid_evict(const Parts& parts, const KvGeometry& model,
                              std::span<const Token> tokens) {
  // A list running past a stored partial last chunk holds that chunk under another key: the
  // window and state records of the prefix the full-attention records hold are named by it, and
  // so are those of every save that ended inside a chunk of the list (one record a part each).
  const std::vector<Chain> chains = chains_over(parts, model, tokens);
  const uint64_t full = full_prefix(parts, tokens, chains, /*reachable=*/false);
  const std::vector<uint64_t> inner = inner_ends(parts, model, tokens.first(full), chains);
  uint64_t dropped = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    Engine::Impl& p = *parts[i];
    if (p.part_.follower) continue;  // the group's writer evicts what the group holds
    const uint32_t chunk = chain_chunk(p, model);
    std::vector<ChunkRef> refs;
    switch (kind_of(p)) {
      case RecordKind::kFullAttention:
        for (uint64_t end : inner) refs.push_back(chains[i].refs(end / chunk, end).back());
        break;
      case RecordKind::kSlidingWindow:
        for (uint64_t end : {uint64_t{tokens.size()}, full}) {
          const std::vector<ChunkRef> all = chains[i].refs(0, end);
          refs.insert(refs.end(), all.begin(), all.end());
        }
        for (uint64_t end : inner) {
          if (end % chunk != 0) refs.push_back(chains[i].refs(end / chunk, end).back());
        }
        break;
      case RecordKind::kState: {
        // A state may be held at the end of any prefix of the list (its chunk boundaries, its
        // end, every save's end inside it): every such key, hashed in one pass. This rank's own
        // store, whatever the full-attention stores (a replicating rank's: its writer's) still
        // name.
        for (uint64_t b = 0; b < tokens.size(); b += chunk) {
          const Key128 parent = b == 0 ? p.namespace_ : chains[i].keys()[b / chunk - 1];
          const std::span<const Token> rest =
              tokens.subspan(b, std::min<uint64_t>(chunk, tokens.size() - b));
          for (const Key128& key : chunk_prefix_keys(parent, rest))
            refs.push_back({key, parent, state_rows(p), 0});
        }
        break;
      }
    }
    std::sort(refs.begin(), refs.end(), [](const ChunkRef& a, const ChunkRef& b) {
      return std::tie(a.key.hi, a.key.lo) < std::tie(b.key.hi, b.key.lo);
    });
    refs.erase(std::unique(refs.begin(), refs.end(),
                           [](const ChunkRef& a, const ChunkRef& b) { return a.key == b.key; }),
               refs.end());
    // One drop a part. A full-attention part's partial chunks inside the list go before its
    // chain: evict() finds a chain's records by walking it from its first chunk, which it drops.
    KVTIER_ASSIGN_OR_RETURN(uint64_t n, p.evict_chunks(refs));
    dropped += n;
    if (kind_of(p) == RecordKind::kFullAttention) {
      KVTIER_ASSIGN_OR_RETURN(n, p.evict(tokens));
      dropped += n;
    }
  }
  return dropped;
}

template Result<SaveResult> hybrid_save(const Parts&, const KvGeometry&, std::span<const Token>,
                                        const ChunkedKv&, const StateMemory*);
template Result<SaveResult> hybrid_save(const Parts&, const KvGeometry&, std::span<const Token>,
                                        const PagedKv&, const StateMemory*);
template Result<RestoreResult> hybrid_restore(const Parts&, const KvGeometry&,
                                              std::span<const Token>, const ChunkedKv&,
                                              const StateMemory*);
template Result<RestoreResult> hybrid_restore(const Parts&, const KvGeometry&,
                                              std::span<const Token>, const PagedKv&,
                                              const StateMemory*);

}  // namespace kvtier
