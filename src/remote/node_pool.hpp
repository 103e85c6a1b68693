// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The idle connections to one Redis node, and the backoff that keeps a dead node from being
// redialled on every request.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "remote/connection.hpp"

namespace kvtier::remote {

/// @brief Connections to one node. Thread-safe: any thread may acquire and release.
class NodePool {
 public:
  using Clock = std::chrono::steady_clock;

  struct Settings {
    Timeouts timeouts;
    std::string password;
    size_t max_idle = 8;
    std::chrono::milliseconds backoff_min{20};
    std::chrono::milliseconds backoff_max{1000};
  };

  NodePool(Endpoint endpoint, const Settings* settings)
      : endpoint_(std::move(endpoint)), settings_(settings) {}

  /// An idle connection, or a new one. While the node is in backoff after failures this fails
  /// at once (kIo) rather than dialling again.
  [[nodiscard]] Result<std::unique_ptr<Connection>> acquire();
  /// Gives a connection back; a broken one is dropped and counts as a failure of the node.
  void release(std::unique_ptr<Connection> connection);
  /// Starts (or lengthens) the node's backoff.
  void note_failure();

  [[nodiscard]] const Endpoint& endpoint() const { return endpoint_; }
  [[nodiscard]] uint64_t connects() const { return connects_.load(std::memory_order_relaxed); }

 private:
  const Endpoint endpoint_;
  const Settings* settings_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
  uint32_t failures_ = 0;                          // guarded by mu_
  Clock::time_point retry_after_{};                // guarded by mu_
  std::atomic<uint64_t> connects_{0};
};

}  // namespace kvtier::remote
