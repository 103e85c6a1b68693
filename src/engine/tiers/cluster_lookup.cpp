// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where the cluster continues a local prefix, and how far it holds the chain from there: what
// lookup() answers and restore() asks the cluster for. Sizes only (STRLEN), never values.
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

uint64_t Engine::Impl::remote_run(std::span<const Token> tokens, std::span<const Key128> keys,
                                  size_t first) {
  if (first >= keys.size()) return 0;
  auto client = remote_->client();
  if (!client) return 0;
  const KvGeometry& g = options_.geometry;
  const uint64_t chunk = g.chunk_tokens;
  uint64_t held = 0;
  for (size_t begin = first; begin < keys.size(); begin += kLookupBatch) {
    const size_t stop = std::min(keys.size(), begin + kLookupBatch);
    std::vector<std::string> names;
    names.reserve(stop - begin);
    for (size_t i = begin; i < stop; ++i) names.push_back(remote_key(keys[i]));
    const auto sizes = client->sizes(names, kLookupAttempts);
    remote_->note(sizes);
    for (size_t i = begin; i < stop; ++i) {
      // The size a restore accepts (expected_record in cluster_restore.cpp): a truncated value, or
      // one of another geometry, ends the run here as it would end the restore.
      const uint64_t here = std::min<uint64_t>(chunk, tokens.size() - i * chunk);
      const remote::KeyOutcome& o = sizes[i - begin];
      if (o.state != remote::KeyState::kDone || o.size < kBlock ||
          !payload_size_fits(store_->record_shape(), static_cast<uint32_t>(here),
                             o.size - kBlock)) {
        return held;
      }
      ++held;
    }
  }
  return held;
}

}  // namespace kvtier
