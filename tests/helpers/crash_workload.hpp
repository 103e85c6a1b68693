// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the crash-test child saves, shared by the child and the test that checks it.
#pragma once

#include <cstdint>
#include <string>

#include "kvtier/kvtier.hpp"

namespace kvtier::crash_workload {

/// `roots`: one directory, or several comma-separated (a store over several drives).
inline Options options(const std::string& roots) {
  Options o;
  for (size_t start = 0;;) {
    const size_t comma = roots.find(',', start);
    std::string dir =
        roots.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    (o.root.empty() ? o.root : o.extra_roots.emplace_back()) = std::move(dir);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  o.geometry = *geometry_for("tiny", 0, 1, 256);
  o.capacity_bytes = uint64_t{32} << 30;  // never evicts, even in the 1,000-kill run
  o.segment_bytes = uint64_t{8} << 20;
  o.io_request_bytes = uint64_t{1} << 20;
  o.staging_bytes = uint64_t{4} << 20;
  o.log_level = LogLevel::kError;
  return o;
}

/// Rank `rank` of TP `tp` over a TP-free store (store_format 2) of the tiny model's two KV heads:
/// at TP 4, ranks 0 and 2 write the heads' groups, ranks 1 and 3 follow them.
inline Options tp_free_options(const std::string& root, uint32_t rank, uint32_t tp) {
  Options o = options(root);
  o.store_format = 2;
  o.geometry.kv_heads = tp <= 2 ? 2 / tp : 1;  // tiny has two
  o.geometry.kv_heads_total = 2;
  o.geometry.tp_rank = rank;
  o.geometry.tp_world = tp;
  o.capacity_bytes = uint64_t{64} << 30;  // 32 GiB a group: never evicts
  return o;
}

/// The same store with Options::compression split16: what the writer saves it keeps coded.
inline Options coded_options(const std::string& root, uint32_t rank, uint32_t tp) {
  Options o = tp_free_options(root, rank, tp);
  o.compression = Compression::kSplit16;
  return o;
}

/// 1 to 3000 tokens: partial chunks, single chunks and records spanning segments all occur.
inline uint64_t session_tokens(uint64_t id) { return 1 + (id * 2654435761u) % 3000; }

}  // namespace kvtier::crash_workload
