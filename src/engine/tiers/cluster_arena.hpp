// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where values fetched from the remote tier land: one region of value-sized slots, allocated at
// open and pinned with the staging for a GPU, so that a restore's GETs copy each value once out of
// hiredis's read buffer into memory already mapped (and, into GPU memory, copied on by DMA),
// instead of hiredis allocating (and the kernel faulting in) a fresh block per value.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "remote/cluster_client.hpp"

namespace kvtier {

/// @brief `bound_bytes / value_bytes` slots (at least one) of `value_bytes` each, lent out as
/// remote::ValueBuffer: a slot comes back when the last holder of its owner lets go. When every
/// slot is lent, lend() gives an empty buffer and the client allocates as usual: bytes in flight
/// past the bound are the client's, never a wait. Thread-safe; loans must not outlive the arena
/// (the engine's restores and promotions end before it closes).
class RemoteArena : public std::enable_shared_from_this<RemoteArena> {
 public:
  RemoteArena(uint64_t value_bytes, uint64_t bound_bytes);
  /// The host memory such an arena holds: one page-rounded value at least, whatever
  /// `bound_bytes` says.
  [[nodiscard]] static uint64_t bytes_for(uint64_t value_bytes, uint64_t bound_bytes);
  [[nodiscard]] remote::ValueBuffer lend(size_t len);
  /// The whole region (to pin it once).
  [[nodiscard]] std::span<std::byte> memory() const { return memory_.span(); }
  /// Takes a lent slot back (what a loan does when its last holder lets go).
  void give_back(size_t slot);

 private:
  const uint64_t value_bytes_;
  const uint64_t stride_;  // value_bytes_ rounded up to the page
  AlignedBuffer memory_;
  std::mutex mu_;
  std::vector<size_t> free_;  // guarded by mu_
};

}  // namespace kvtier
