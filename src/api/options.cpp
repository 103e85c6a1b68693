// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kvtier/options.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "api/env.hpp"
#include "api/try.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kAlign = 4096;

// Precedence: a field set by the caller, then the environment, then the default.
uint64_t pick(uint64_t explicit_value, const std::optional<uint64_t>& env, uint64_t fallback) {
  if (explicit_value != 0) return explicit_value;
  return env.value_or(fallback);
}

// How long a session a store's segments are sized for when they spread it over several drives.
constexpr uint64_t kSpreadTokens = 100000;

// A new store's segment size. On one drive: capacity/4, at most 1 GiB, at least 16 MiB. Over
// several: halved (down to 64 MiB, and never below two chunk records) until one 100K-token session
// of this rank's KV fills at least two segments per drive. A session's segments go to the drive
// with the most room, one after another, so with fewer segments than that some drives get none of
// it and the others one more than their share, and a restore waits for the busiest drive.
uint64_t default_segment_bytes(const Options& o, uint64_t record) {
  uint64_t segment =
      std::max<uint64_t>(std::min(kGiB, o.capacity_bytes / 4) / kAlign * kAlign, 16 * kMiB);
  const uint64_t drives = 1 + o.extra_roots.size();
  if (drives == 1) return segment;
  const uint64_t session = o.geometry.bytes_for_tokens(kSpreadTokens);
  const uint64_t floor = std::max(64 * kMiB, 2 * record);
  while (segment / 2 >= floor && (session + segment - 1) / segment < 2 * drives) {
    segment = segment / 2 / kAlign * kAlign;
  }
  return segment;
}

}  // namespace

Result<Options> Options::resolved() const {
  KVTIER_ASSIGN_OR_RETURN(EnvOverrides env, read_env_overrides());
  Options o = *this;
  KVTIER_EXPECTS(!o.root.empty(), "options: root directory is empty");
  for (const std::string& extra : o.extra_roots) {
    KVTIER_EXPECTS(!extra.empty(), "options: a drive's root directory is empty");
  }
  KVTIER_TRY(o.geometry.validate());
  KVTIER_EXPECTS(o.tenant.size() <= 256, "options: tenant salt over 256 bytes");
  KVTIER_EXPECTS(o.store_format == 1 || o.store_format == 2,
                 fmt::format("options: store_format {} is not 1 (a store per TP rank) or 2 "
                             "(TP-free)",
                             o.store_format));
  KVTIER_EXPECTS(o.max_tp >= 1 && o.max_tp <= 1024 && (o.max_tp & (o.max_tp - 1)) == 0,
                 fmt::format("options: max_tp {} is not a power of two in 1..1024", o.max_tp));
  if (o.compression != Compression::kOff) {
    KVTIER_EXPECTS(o.store_format == 2,
                   fmt::format("options: compression {} needs store_format 2, whose records say "
                               "how they are stored (format 1's do not)",
                               compression_name(o.compression)));
    KVTIER_EXPECTS(o.geometry.element_bytes == 2,
                   fmt::format("options: compression {} codes 16-bit KV (bf16, fp16); this "
                               "model's elements are {} bytes",
                               compression_name(o.compression), o.geometry.element_bytes));
  }
  if (!o.log_level) o.log_level = env.log_level.value_or(LogLevel::kWarn);
  if (o.io_path == IoPath::kAuto && env.io_path) o.io_path = *env.io_path;
  o.capacity_bytes = pick(o.capacity_bytes, env.capacity_bytes, 64 * kGiB);
  // A chunk's record (header + payload) must fit in one segment.
  const uint64_t record = o.geometry.bytes_for_tokens(o.geometry.chunk_tokens) + 2 * kAlign;
  o.segment_bytes = pick(o.segment_bytes, env.segment_bytes, default_segment_bytes(o, record));
  o.io_request_bytes = pick(o.io_request_bytes, env.io_request_bytes, 16 * kMiB);
  o.staging_bytes = pick(o.staging_bytes, env.staging_bytes, 128 * kMiB);
  o.dram_bytes = pick(o.dram_bytes, env.dram_bytes, 0);

  auto aligned = [](uint64_t v) { return v % kAlign == 0; };
  KVTIER_EXPECTS(
      aligned(o.segment_bytes) && aligned(o.io_request_bytes) && aligned(o.staging_bytes),
      "options: segment, request and staging sizes must be multiples of 4 KiB");
  KVTIER_EXPECTS(
      o.io_request_bytes >= kAlign && o.io_request_bytes <= kGiB,
      fmt::format("options: request size {} not in 4 KiB..1 GiB", size_text(o.io_request_bytes)));
  KVTIER_EXPECTS(
      o.staging_bytes >= o.io_request_bytes && o.staging_bytes <= 64 * kGiB,
      fmt::format("options: staging {} must be at least the request size ({}) and at most 64 GiB",
                  size_text(o.staging_bytes), size_text(o.io_request_bytes)));
  KVTIER_EXPECTS(o.segment_bytes <= o.capacity_bytes,
                 fmt::format("options: segment size {} exceeds capacity {}",
                             size_text(o.segment_bytes), size_text(o.capacity_bytes)));
  KVTIER_EXPECTS(
      record <= o.segment_bytes,
      fmt::format("options: a {}-token chunk needs {} but segments are {}", o.geometry.chunk_tokens,
                  size_text(record), size_text(o.segment_bytes)));
  KVTIER_EXPECTS(o.dram_bytes == 0 || o.dram_bytes >= record,
                 fmt::format("options: a DRAM tier of {} cannot hold one chunk of {}",
                             size_text(o.dram_bytes), size_text(record)));
  return o;
}

}  // namespace kvtier
