// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A STREAM-like background load on host memory: threads copying between large buffers, counting
// the bytes they move (read + write). Run next to restores, it measures how much host memory
// bandwidth each data path leaves to the rest of the machine.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace kvtier::seed {

class HostLoad {
 public:
  /// Starts `threads` copy loops over buffers of `buffer_bytes` each (source and destination).
  HostLoad(unsigned threads, uint64_t buffer_bytes);
  ~HostLoad();
  HostLoad(const HostLoad&) = delete;
  HostLoad& operator=(const HostLoad&) = delete;

  /// Bytes moved so far (each copied byte counts twice: read and written).
  [[nodiscard]] uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  [[nodiscard]] unsigned threads() const { return static_cast<unsigned>(threads_.size()); }
  /// Waits `window` and returns the bytes per second the load moved over it (the caller runs
  /// nothing else meanwhile: the load's bandwidth alone).
  [[nodiscard]] double rate_over(std::chrono::milliseconds window) const;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_{0};
  std::vector<std::thread> threads_;
};

}  // namespace kvtier::seed
