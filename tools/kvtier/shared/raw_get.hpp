// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The remote tier's ceiling for `bench --workload shared`: a raw parallel GET of exactly the keys a
// restore asks for, written directly against hiredis rather than through kvtier's cluster client,
// so that a bottleneck in that client shows as a gap instead of lowering the ceiling too. Values
// are discarded once their size is checked: no verification, no placement.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtier/kvtier.hpp"

namespace kvtier::shared {

struct RawGetConfig {
  std::string seeds;     ///< "redis://host:port[,host:port...]", as --remote takes them
  std::string password;  ///< "" sends no AUTH
  uint32_t connections_per_node = 4;
};

struct RawGetResult {
  uint64_t values = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double cpu_seconds = 0;  ///< this process's CPU time (every thread) over the GETs
  uint32_t nodes = 0;
  uint32_t depth = 0;  ///< GETs in flight per connection
};

/// @brief Keeps connections_per_node connections open to every master and GETs batches of keys
/// over all of them at once, each connection with a fixed number of requests in flight. The slot
/// of each key comes from the cluster itself (CLUSTER KEYSLOT, asked once per key outside the
/// timed part), not from kvtier's hash. Not thread-safe.
class RawGet {
 public:
  [[nodiscard]] static Result<std::unique_ptr<RawGet>> create(const RawGetConfig& config);
  ~RawGet();
  RawGet(const RawGet&) = delete;
  RawGet& operator=(const RawGet&) = delete;

  /// GETs every key; a missing key or a value of another size than expected fails the run.
  /// `in_flight` bounds the GETs outstanding over all connections together (the bytes a kvtier
  /// restore may have in flight, in values), at least one per connection.
  [[nodiscard]] Result<RawGetResult> run(std::span<const RemoteRecordKey> keys, uint64_t in_flight);

  struct Impl;

 private:
  explicit RawGet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::shared
