// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/keys.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <fmt/format.h>

namespace kvtier {

std::string Key128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Key128 namespace_key(const KvGeometry& geometry, std::string_view tenant, uint32_t version,
                     std::string_view part) {
  std::string text = fmt::format("kvtier-ns-v{}\n{}\n", version, geometry.describe());
  if (!part.empty()) text += fmt::format("{}\n", part);
  text.append(tenant);
  XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.low64, h.high64};
}

Key128 chunk_key(const Key128& parent, std::span<const Token> chunk_tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const uint64_t parent_words[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, parent_words, sizeof(parent_words));
  XXH3_128bits_update(&state, chunk_tokens.data(), chunk_tokens.size_bytes());
  XXH128_hash_t h = XXH3_128bits_digest(&state);
  return {h.low64, h.high64};
}

std::vector<Key128> chunk_prefix_keys(const Key128& parent, std::span<const Token> chunk_tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const uint64_t parent_words[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, parent_words, sizeof(parent_words));
  std::vector<Key128> keys;
  keys.reserve(chunk_tokens.size());
  for (const Token& t : chunk_tokens) {
    XXH3_128bits_update(&state, &t, sizeof(t));
    const XXH128_hash_t h = XXH3_128bits_digest(&state);  // leaves the state as it was
    keys.push_back({h.low64, h.high64});
  }
  return keys;
}

std::vector<Key128> chain_keys(const Key128& ns, std::span<const Token> tokens,
                               uint32_t chunk_tokens) {
  std::vector<Key128> keys;
  keys.reserve(tokens.size() / chunk_tokens + 1);
  Key128 parent = ns;
  for (size_t start = 0; start < tokens.size(); start += chunk_tokens) {
    size_t n = std::min<size_t>(chunk_tokens, tokens.size() - start);
    parent = chunk_key(parent, tokens.subspan(start, n));
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace kvtier
