// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/hybrid.hpp"

#include <algorithm>

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
/// of any prefix ending at a chunk boundary or at the list's end, without hashing again.
class Chain {
 public:
  Chain(const Engine::Impl& part, std::span<const Token> tokens, uint32_t chunk)
      : ns_(part.namespace_), chunk_(chunk), keys_(chain_keys(ns_, tokens, chunk)) {}

  /// Chunks [first, ceil(end / chunk)) of the prefix of `end` tokens; `end` is a chunk boundary
  /// or the list's end.
  [[nodiscard]] std::vector<ChunkRef> refs(size_t first, uint64_t end) const {
    return chain_refs(ns_, keys_, chunk_, first, end);
  }

  /// The state record of the prefix of `end` tokens: named by that prefix's last key.
  [[nodiscard]] ChunkRef state(uint64_t end, uint32_t state_rows) const {
    const ChunkRef last = refs((end - 1) / chunk_, end).back();
    return {last.key, last.parent, state_rows, 0};
  }

 private:
  Key128 ns_;
  uint32_t chunk_;
  std::vector<Key128> keys_;
};

uint32_t state_rows(const Engine::Impl& part) { return part.options_.geometry.chunk_tokens; }

/// Whether every window and state part holds what a prefix of `end` tokens needs (`chains[i]`:
/// part i's over the tokens, for those parts).
bool boundary_held(const Parts& parts, const std::vector<std::optional<Chain>>& chains,
                   const KvGeometry& model, uint64_t end) {
  for (size_t i = 0; i < parts.size(); ++i) {
    Engine::Impl& p = *parts[i];
    if (kind_of(p) == RecordKind::kSlidingWindow) {
      const std::vector<ChunkRef> refs = chains[i]->refs(window_first_chunk(model, end), end);
      if (p.held_chunks(refs) != refs.size()) return false;
    } else if (kind_of(p) == RecordKind::kState) {
      const ChunkRef ref = chains[i]->state(end, state_rows(p));
      if (p.held_chunks(std::span(&ref, 1)) != 1) return false;
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

/// The prefix of `tokens` every full-attention part holds locally.
uint64_t full_prefix(const Parts& parts, std::span<const Token> tokens) {
  uint64_t full = tokens.size();
  for (const auto& part : parts) {
    if (kind_of(*part) == RecordKind::kFullAttention)
      full = std::min(full, part->local_prefix(tokens));
  }
  return full;
}

/// The first full-attention part: the one whose partial-chunk records name where saves ended
/// inside chunks (every full-attention part of a save stores the same ends).
Engine::Impl* first_full_part(const Parts& parts) {
  for (const auto& part : parts) {
    if (kind_of(*part) == RecordKind::kFullAttention) return part.get();
  }
  return nullptr;
}

/// The ends of saves inside chunks of `tokens` that the first full-attention part holds: a
/// partial-chunk record after each of the boundaries `tokens` spans whole, ascending (a chunked
/// prefill's step ends, a turn's end that a longer session went past).
std::vector<uint64_t> inner_ends(const Parts& parts, const KvGeometry& model,
                                 std::span<const Token> tokens) {
  Engine::Impl* first = first_full_part(parts);
  if (first == nullptr) return {};
  const uint64_t chunk = model.chunk_tokens;
  const std::vector<Key128> keys = chain_keys(first->namespace_, tokens, model.chunk_tokens);
  std::vector<uint64_t> ends;
  for (uint64_t b = 0; b < tokens.size(); b += chunk) {
    const std::vector<RecordMeta> partial = first->partial_chunks(tokens, keys, b);
    for (auto it = partial.rbegin(); it != partial.rend(); ++it)
      ends.push_back(b + it->token_count);
  }
  return ends;
}

/// Whether every part holds what a prefix of `end` tokens of `tokens` needs: its full-attention
/// KV (`full_held`: known to be held), its last window and its state.
bool held_at(const Parts& parts, const KvGeometry& model, std::span<const Token> tokens,
             uint64_t end, bool full_held) {
  const std::span<const Token> prefix = tokens.first(end);
  std::vector<std::optional<Chain>> chains(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    Engine::Impl& p = *parts[i];
    if (kind_of(p) == RecordKind::kFullAttention) {
      if (!full_held && p.local_prefix(prefix) != end) return false;
    } else {
      chains[i].emplace(p, prefix, chain_chunk(p, model));
    }
  }
  return boundary_held(parts, chains, model, end);
}

/// The longest prefix every part holds locally (the cluster tier holds a hybrid model's
/// full-attention KV, but its window and state records are local: hits are found here).
uint64_t held_boundary(const Parts& parts, const KvGeometry& model, std::span<const Token> tokens) {
  for (const auto& part : parts) part->follow_writer();
  const uint64_t full = full_prefix(parts, tokens);
  if (full == 0) return 0;
  const std::span<const Token> prefix = tokens.first(full);
  std::vector<std::optional<Chain>> chains(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (kind_of(*parts[i]) != RecordKind::kFullAttention)
      chains[i].emplace(*parts[i], prefix, chain_chunk(*parts[i], model));
  }
  // From the end of the full-attention prefix down through the chunk boundaries before it and
  // the ends of saves inside each chunk (a state is kept wherever a save ended).
  const uint64_t chunk = model.chunk_tokens;
  std::vector<uint64_t> inner = inner_ends(parts, model, prefix);
  for (uint64_t end = full; end > 0;) {
    if (boundary_held(parts, chains, model, end)) return end;
    const uint64_t below = (end - 1) / chunk * chunk;
    while (!inner.empty() && inner.back() > below) {
      const uint64_t at = inner.back();
      inner.pop_back();
      if (at < end && held_at(parts, model, tokens, at, /*full_held=*/false)) return at;
    }
    end = below;
  }
  return 0;
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
  const uint64_t end = held_boundary(parts, model, tokens);
  if (end == 0) return RestoreResult{};
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
  // so are those of every save that ended inside a chunk of the list.
  const std::span<const Token> held = tokens.first(full_prefix(parts, tokens));
  std::vector<std::span<const Token>> lists = {tokens, held};
  for (uint64_t end : inner_ends(parts, model, held)) lists.push_back(tokens.first(end));
  uint64_t dropped = 0;
  for (const auto& part : parts) {
    Engine::Impl& p = *part;
    if (p.part_.follower) continue;  // the group's writer evicts what the group holds
    uint64_t d = 0;
    switch (kind_of(p)) {
      case RecordKind::kFullAttention: {
        // The partial chunks inside the list first: evict() finds a chain's records by walking
        // it from its first chunk, which it drops.
        for (size_t i = 2; i < lists.size(); ++i) {
          const ChunkRef last = p.chunk_refs(lists[i]).back();
          KVTIER_ASSIGN_OR_RETURN(uint64_t n, p.evict_chunks(std::span(&last, 1)));
          d += n;
        }
        KVTIER_ASSIGN_OR_RETURN(uint64_t n, p.evict(tokens));
        d += n;
        break;
      }
      case RecordKind::kSlidingWindow: {
        for (std::span<const Token> list : lists) {
          KVTIER_ASSIGN_OR_RETURN(uint64_t n, p.evict_chunks(p.chunk_refs(list)));
          d += n;
        }
        break;
      }
      case RecordKind::kState: {
        // A state may be held at every chunk boundary of the session, at its end and at the end
        // of every save inside it.
        for (std::span<const Token> list : lists) {
          std::vector<ChunkRef> refs = Chain(p, list, model.chunk_tokens).refs(0, list.size());
          for (ChunkRef& r : refs) r = {r.key, r.parent, state_rows(p), 0};
          KVTIER_ASSIGN_OR_RETURN(uint64_t n, p.evict_chunks(refs));
          d += n;
        }
        break;
      }
    }
    dropped += d;
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
