// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Seeded random cases for the save/restore property tests (CPU and GPU): geometries, token counts
// near the boundaries the data path cuts at (chunks, staging slots, the scatter kernel's batches of
// 32 spans), I/O paths, paged layouts and block sizes, staging sizes. Case i of a seed is drawn
// from (seed, i) alone, so any one case can be replayed without the others (KVTIER_PROPERTY_CASE).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include <fmt/format.h>

#include "common/head_groups.hpp"
#include "kvtier/kvtier.hpp"

namespace kvtier::testing {

struct PropertyLimits {
  uint64_t cases = 60;
  uint64_t max_case_bytes = uint64_t{6} << 20;  ///< KV bytes of one session
  uint64_t max_tokens = 100000;
  bool gpu = false;  ///< draw the GPU's paths (cuFile) too
};

/// How many cases and how large: the defaults, overridden by KVTIER_PROPERTY_CASES and
/// KVTIER_PROPERTY_MAX_MB (the H200's wide slice sets both).
inline PropertyLimits property_limits(PropertyLimits base) {
  if (const char* c = std::getenv("KVTIER_PROPERTY_CASES"))
    base.cases = std::strtoull(c, nullptr, 10);
  if (const char* m = std::getenv("KVTIER_PROPERTY_MAX_MB"))
    base.max_case_bytes = std::strtoull(m, nullptr, 10) << 20;
  return base;
}

/// The one case to run (KVTIER_PROPERTY_CASE), or -1 for all.
inline int64_t property_only_case() {
  const char* c = std::getenv("KVTIER_PROPERTY_CASE");
  return c == nullptr ? -1 : std::strtoll(c, nullptr, 10);
}

struct PropertyCase {
  uint64_t index = 0;
  KvGeometry g;
  bool valid = true;  ///< false: a geometry kvtier must refuse at open (row not 8-byte words)
  uint64_t tokens = 0;
  uint64_t capacity = 0;      ///< contiguous targets: token axis length (>= tokens)
  const char* boundary = "";  ///< which boundary the token count was drawn near
  IoPath io = IoPath::kDirect;
  bool dram = false;
  bool paged = false;
  PagedLayout layout = PagedLayout::kKvFirst;
  uint32_t block_size = 16;
  uint64_t request_bytes = 0;
  uint64_t staging_bytes = 0;
  bool prefix_first =
      false;                ///< save the first part first, then the whole (chunks already present)
  bool src_device = false;  ///< GPU tests: where the saved KV lives
  bool dst_device = false;  ///< GPU tests: where it is restored
  /// 16-bit KV only: a TP-free store keeping its records coded (Options::compression), the KV
  /// made compressible (testing::bf16_like) so that they are.
  bool coded = false;

  [[nodiscard]] std::string describe() const {
    return fmt::format(
        "case {}: layers {} kv_heads {} head_dim {} element {} chunk {} | {} tokens ({}) | io {}{} "
        "| "
        "{} | request {} KiB staging {} KiB{}{}",
        index, g.layers, g.kv_heads, g.head_dim, g.element_bytes, g.chunk_tokens, tokens, boundary,
        io_path_name(io), dram ? "+dram" : "",
        paged ? fmt::format("paged layout {} block {}", static_cast<int>(layout), block_size)
              : fmt::format("contiguous capacity {}", capacity),
        request_bytes >> 10, staging_bytes >> 10, prefix_first ? " | prefix saved first" : "",
        fmt::format(" | src {} dst {}{}", src_device ? "device" : "host",
                    dst_device ? "device" : "host", coded ? " | coded" : ""));
  }
};

/// Case `index` of `seed`.
inline PropertyCase draw_case(uint64_t seed, uint64_t index, const PropertyLimits& lim) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + index);
  auto uniform = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  auto log_uniform = [&](double lo, double hi) {
    return static_cast<uint64_t>(
        std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng)));
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  PropertyCase c;
  c.index = index;
  c.g.model_id = "property";
  static constexpr uint32_t kHeadDims[] = {64, 80, 96, 128, 192, 256, 576};
  static constexpr uint32_t kOddHeadDims[] = {1, 3, 8, 24, 40, 72, 100, 112, 136, 200, 1000};
  static constexpr uint32_t kElements[] = {1, 2, 4};
  // Shrunk until one chunk fits the case's byte budget at least twice.
  for (;;) {
    c.g.layers = static_cast<uint32_t>(log_uniform(1, 129));
    c.g.kv_heads = static_cast<uint32_t>(log_uniform(1, 17));
    c.g.head_dim = chance(0.8) ? kHeadDims[uniform(0, 6)] : kOddHeadDims[uniform(0, 10)];
    c.g.element_bytes = kElements[uniform(0, 2)];
    c.g.chunk_tokens = static_cast<uint32_t>(log_uniform(16, 1025));
    if (2 * c.g.bytes_for_tokens(c.g.chunk_tokens) <= lim.max_case_bytes) break;
  }
  c.valid = c.g.validate().ok();

  c.request_bytes = uint64_t{1} << (20 + uniform(0, 4));  // 1..16 MiB
  c.staging_bytes = c.request_bytes * (uint64_t{1} << uniform(0, 3));
  const uint64_t per_token = c.g.bytes_per_token();
  const uint64_t cap =
      std::max<uint64_t>(1, std::min(lim.max_tokens, lim.max_case_bytes / per_token));
  const uint64_t chunk = c.g.chunk_tokens;
  const int64_t delta = static_cast<int64_t>(uniform(0, 2)) - 1;  // -1, 0, +1
  auto near = [&](uint64_t at) {
    return static_cast<uint64_t>(std::max<int64_t>(1, static_cast<int64_t>(at) + delta));
  };
  uint64_t want = 0;
  switch (uniform(0, 5)) {
    case 0:
      c.boundary = "chunk";
      want = near(chunk * uniform(1, 8));
      break;
    case 1:  // a record's payload crossing a staging slot's end
      c.boundary = "staging slot";
      want = near(c.request_bytes * uniform(1, 3) / per_token);
      break;
    case 2:  // pieces of more than 32 records: several scatter launches per piece
      c.boundary = "record batch";
      want = near(chunk * (32 * uniform(1, 2)));
      break;
    case 3:
      c.boundary = "single token";
      want = uniform(1, 3);
      break;
    case 4:
      c.boundary = "largest";
      want = cap - uniform(0, std::min<uint64_t>(cap - 1, 2));
      break;
    default:
      c.boundary = "random";
      want = uniform(1, cap);
      break;
  }
  if (want > cap) {
    c.boundary = "random (boundary past the budget)";
    want = uniform(1, cap);
  }
  c.tokens = want;
  c.capacity = c.tokens + (chance(0.3) ? uniform(1, chunk) : 0);

  const uint64_t paths = lim.gpu ? 4 : 3;
  switch (uniform(0, paths - 1)) {
    case 0:
      c.io = IoPath::kDirect;
      break;
    case 1:
      c.io = IoPath::kBuffered;
      break;
    case 2:
      c.io = IoPath::kDirect;
      c.dram = true;
      break;
    default:
      c.io = IoPath::kGds;
      break;
  }
  c.paged = chance(0.5);
  c.layout = static_cast<PagedLayout>(uniform(0, 2));
  static constexpr uint32_t kBlockSizes[] = {1, 2, 8, 16, 32, 64, 128, 256, 1024};
  c.block_size = kBlockSizes[uniform(0, 8)];
  c.prefix_first = c.tokens > chunk && chance(0.25);
  c.src_device = chance(0.5);
  c.dst_device = chance(0.5);
  // Coded records need a TP-free store, whose head groups (Options::max_tp 8) must each hold rows
  // of whole 8-byte words, like any geometry; a case whose groups would not stays raw.
  const HeadSplit split{.kv_heads = c.g.kv_heads, .max_tp = Options{}.max_tp};
  const bool groups_hold_words =
      uint64_t{split.heads_per_group()} * c.g.head_dim * c.g.element_bytes % 8 == 0;
  c.coded = c.g.element_bytes == 2 && chance(0.4) && groups_hold_words;
  return c;
}

/// Options of a case's engine under `root`.
inline Options property_options(const PropertyCase& c, const std::string& root) {
  Options o;
  o.root = root;
  o.geometry = c.g;
  o.io_path = c.io;
  o.capacity_bytes = uint64_t{4} << 30;
  // Segments hold several of the case's largest records.
  o.segment_bytes = std::max<uint64_t>(uint64_t{256} << 20,
                                       std::bit_ceil(4 * c.g.bytes_for_tokens(c.g.chunk_tokens)));
  o.io_request_bytes = c.request_bytes;
  o.staging_bytes = c.staging_bytes;
  // Room for every chunk of the case, whatever its size.
  if (c.dram)
    o.dram_bytes = std::max<uint64_t>(uint64_t{64} << 20,
                                      2 * c.g.bytes_for_tokens(c.tokens + c.g.chunk_tokens));
  o.log_level = LogLevel::kOff;
  if (c.coded) {
    o.store_format = 2;
    o.geometry.kv_heads_total = c.g.kv_heads;  // the whole model at TP 1
    o.compression = Compression::kSplit16;
  }
  return o;
}

}  // namespace kvtier::testing
