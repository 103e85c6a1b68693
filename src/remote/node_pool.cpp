// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "remote/node_pool.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvtier::remote {

Result<std::unique_ptr<Connection>> NodePool::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
    if (Clock::now() < retry_after_) {
      return fail(ErrorCode::kIo,
                  fmt::format("redis {}: unreachable (reconnect backoff after {} failures)",
                              endpoint_.to_string(), failures_));
    }
  }
  // Dialled outside the lock: a slow connect must not hold up callers that find idle connections.
  auto connection = Connection::open(endpoint_, settings_->timeouts, settings_->password);
  if (!connection) {
    if (connection.error().code() != ErrorCode::kPermission) note_failure();
    return connection;
  }
  connects_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  failures_ = 0;
  return connection;
}

void NodePool::release(std::unique_ptr<Connection> connection) {
  if (connection->broken()) {
    note_failure();
    return;
  }
  std::lock_guard lock(mu_);
  if (idle_.size() < settings_->max_idle) idle_.push_back(std::move(connection));
}

void NodePool::note_failure() {
  std::lock_guard lock(mu_);
  // Exponential backoff from the first failure on; the first retry comes after backoff_min.
  const uint32_t shift = std::min<uint32_t>(failures_, 16);
  const auto delay = std::min(settings_->backoff_max, settings_->backoff_min * (1u << shift));
  ++failures_;
  retry_after_ = Clock::now() + delay;
  idle_.clear();  // connections made before the failure are suspect too
}

}  // namespace kvtier::remote
