// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where the cluster continues a local prefix, and how far it holds the chain from there: what
// lookup() answers and restore() asks the cluster for. Sizes only (STRLEN), never values.
#include <algorithm>

#include "engine/engine_impl.hpp"

namespace kvtier {
namespace {

// Keys asked per pipelined batch of STRLENs: a 100K-token prompt in 256-token chunks is one batch
// (each master answers its share over its connections in one round trip); a chain that ends early
// costs at most one batch past its end.
constexpr size_t kLookupBatch = 512;
// Rounds a lookup's batch gets: enough to follow one MOVED or ASK, or to reconnect once after a
// failover; more would keep a scheduler waiting through the client's whole backoff (~0.6 s per
// lookup while a node is down) for an answer it can do without.
constexpr uint32_t kLookupAttempts = 2;

}  // namespace

size_t Engine::Impl::remote_start(std::span<const Token> tokens,
                                  std::span<const LocatedRecord> served) const {
  if (served.empty()) return 0;
  const uint64_t chunk = options_.geometry.chunk_tokens;
  const size_t last = served.size() - 1;
  const uint64_t wanted = std::min<uint64_t>(chunk, tokens.size() - last * chunk);
  return served.back().meta.token_count < wanted ? last : served.size();
}

std::vector<bool> Engine::Impl::remote_fits(std::span<const Key128> keys,
                                            std::span<const uint32_t> tokens, bool run) {
  std::vector<bool> held(keys.size(), false);
  auto client = remote_ ? remote_->client() : nullptr;
  if (!client) return held;
  for (size_t begin = 0; begin < keys.size(); begin += kLookupBatch) {
    const size_t stop = std::min(keys.size(), begin + kLookupBatch);
    std::vector<std::string> names;
    names.reserve(stop - begin);
    for (size_t i = begin; i < stop; ++i) names.push_back(remote_key(keys[i]));
    remote_->counters.remote_probes += names.size();
    const auto sizes = client->sizes(names, kLookupAttempts);
    remote_->note(sizes);
    bool all = true;
    for (size_t i = begin; i < stop; ++i) {
      // The size a restore accepts (expected_record in cluster_restore.cpp): a truncated value, or
      // one of another geometry, is not held, as a restore would reject it.
      const remote::KeyOutcome& o = sizes[i - begin];
      held[i] = o.state == remote::KeyState::kDone && o.size >= kBlock &&
                payload_size_fits(store_->record_shape(), tokens[i], o.size - kBlock);
      all = all && held[i];
    }
    if (run && !all) break;
  }
  return held;
}

uint64_t Engine::Impl::remote_run(std::span<const Token> tokens, std::span<const Key128> keys,
                                  size_t first) {
  if (first >= keys.size()) return 0;
  const uint64_t chunk = options_.geometry.chunk_tokens;
  std::vector<uint32_t> sizes;
  for (size_t i = first; i < keys.size(); ++i)
    sizes.push_back(static_cast<uint32_t>(std::min<uint64_t>(chunk, tokens.size() - i * chunk)));
  const std::vector<bool> held = remote_fits(keys.subspan(first), sizes, /*run=*/true);
  return static_cast<uint64_t>(std::find(held.begin(), held.end(), false) - held.begin());
}

std::vector<bool> Engine::Impl::remote_holds(std::span<const ChunkRef> chunks) {
  std::vector<Key128> keys;
  std::vector<uint32_t> sizes;
  for (const ChunkRef& c : chunks) {
    keys.push_back(c.key);
    sizes.push_back(c.tokens);
  }
  return remote_fits(keys, sizes, /*run=*/false);
}

}  // namespace kvtier
