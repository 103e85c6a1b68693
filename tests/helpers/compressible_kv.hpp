// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Synthetic KV made compressible, for the tests of coded records (Options::compression).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <vector>

#include "synthetic_rows.hpp"
#include "tp_reference.hpp"

namespace kvtier::testing {

/// Makes random KV words (synthetic::fill_kv's) as compressible as a model's bf16 KV, each
/// little-endian 16-bit word as synthetic::bf16_like_lane makes it (the seed bench's --kv
/// bf16-like), so split16 codes its exponents in two bits and its records are kept coded.
inline void bf16_like(std::span<std::byte> kv) {
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    const uint16_t w = synthetic::bf16_like_lane(static_cast<uint16_t>(
        static_cast<uint32_t>(kv[i]) | (static_cast<uint32_t>(kv[i + 1]) << 8)));
    kv[i] = static_cast<std::byte>(w & 0xff);
    kv[i + 1] = static_cast<std::byte>(w >> 8);
  }
}

/// The model's KV of the session, [kv_tensors, layers, tokens, heads, head_dim] of bf16 words
/// drawn from N(0, sigma) with a sigma per layer; tokens in `random_chunks` (chunk indexes) are
/// random bytes instead, which no codec shrinks.
inline std::vector<std::byte> bf16_kv(const TpModel& m, std::mt19937_64& rng,
                                      const std::vector<uint64_t>& random_chunks = {}) {
  std::vector<std::byte> kv(m.kv_tensors * m.layers * m.tokens * m.heads * m.head_bytes());
  const uint64_t row = m.heads * m.head_bytes();
  for (uint64_t line = 0; line < m.kv_tensors * m.layers; ++line) {
    std::normal_distribution<float> value(0.0f, std::ldexp(1.0f, static_cast<int>(rng() % 12) - 6));
    for (uint64_t t = 0; t < m.tokens; ++t) {
      std::byte* out = kv.data() + (line * m.tokens + t) * row;
      const bool random =
          std::find(random_chunks.begin(), random_chunks.end(), t / m.chunk) != random_chunks.end();
      for (uint64_t i = 0; i < row / 2; ++i) {
        const uint32_t bits =
            random ? static_cast<uint32_t>(rng()) : std::bit_cast<uint32_t>(value(rng)) >> 16;
        out[2 * i] = static_cast<std::byte>(bits & 0xff);
        out[2 * i + 1] = static_cast<std::byte>((bits >> 8) & 0xff);
      }
    }
  }
  return kv;
}

/// Where a format-2 record's stored payload lies in a segment file.
struct StoredPayload {
  std::filesystem::path file;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool coded = false;
};

/// Every record's stored payload under `root` (segment files, read by their headers' raw and stored
/// sizes), for tests that damage them.
inline std::vector<StoredPayload> stored_payloads(const std::filesystem::path& root) {
  std::vector<StoredPayload> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".kvt") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> block(4096);
    for (uint64_t at = 0; in.read(block.data(), block.size()); at += block.size()) {
      if (std::memcmp(block.data(), "KVTREC02", 8) != 0) continue;
      uint64_t raw = 0, stored = 0;
      std::memcpy(&raw, block.data() + 104, 8);
      std::memcpy(&stored, block.data() + 112, 8);
      if (stored == 0 || stored > raw) continue;
      out.push_back({entry.path(), at + 4096, stored, stored < raw});
    }
  }
  return out;
}

/// The stored payloads of the file of one of `all`, drawn, in file (token) order.
inline std::vector<StoredPayload> payloads_of_a_file(const std::vector<StoredPayload>& all,
                                                     std::mt19937_64& rng) {
  const std::filesystem::path file = all[rng() % all.size()].file;
  std::vector<StoredPayload> out;
  for (const StoredPayload& p : all) {
    if (p.file == file) out.push_back(p);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  return out;
}

/// Flips some bits of byte `at` of payload `p`.
inline void damage(const StoredPayload& p, uint64_t at, std::mt19937_64& rng) {
  std::fstream f(p.file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(p.offset + at));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ (1 + rng() % 255));
  f.seekp(static_cast<std::streamoff>(p.offset + at));
  f.write(&c, 1);
}

}  // namespace kvtier::testing
