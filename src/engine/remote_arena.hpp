// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where values fetched from the remote tier land: reusable buffers, so that a restore's GETs copy
// each value once out of hiredis's read buffer into memory already mapped, instead of hiredis
// allocating (and the kernel faulting in) a fresh block per value.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "remote/cluster_client.hpp"

namespace kvtier {

/// @brief Buffers of at least `value_bytes` each, at most `bound_bytes` of them in all, lent out
/// as remote::ValueBuffer (the buffer comes back when the last holder of its owner lets go). When
/// all are lent, lend() gives an empty buffer and the client allocates as usual: bytes in flight
/// past the bound are the client's, never a wait. Thread-safe.
class RemoteArena : public std::enable_shared_from_this<RemoteArena> {
 public:
  RemoteArena(uint64_t value_bytes, uint64_t bound_bytes);
  [[nodiscard]] remote::ValueBuffer lend(size_t len);
  [[nodiscard]] uint64_t value_bytes() const { return value_bytes_; }
  [[nodiscard]] uint64_t bound_bytes() const { return bound_bytes_; }
  /// Takes a lent buffer back (what a loan does when its last holder lets go).
  void give_back(AlignedBuffer buffer);

 private:
  const uint64_t value_bytes_;
  const uint64_t bound_bytes_;
  std::mutex mu_;
  std::vector<AlignedBuffer> free_;  // guarded by mu_
  uint64_t made_ = 0;                // buffers made so far; guarded by mu_
};

}  // namespace kvtier
