// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// ClusterClient's state: the nodes, the slot map and one batch's bookkeeping.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "remote/cluster_client.hpp"
#include "remote/node_pool.hpp"
#include "remote/slot.hpp"

namespace kvtier::remote {

/// One batch: the keys, what to do with each, and where results go.
struct Request {
  enum class Op : uint8_t { kGet, kSet, kStrlen };
  Op op = Op::kGet;
  std::span<const std::string> keys;
  std::span<const std::span<const std::byte>> values;  // kSet only
  std::string ttl_ms;                                  // kSet only; "" = no expiry
  const ValueSink* sink = nullptr;                     // kGet: sink or owned_sink
  const OwnedValueSink* owned_sink = nullptr;
  const ValueAllocator* allocate = nullptr;  // kGet with owned_sink: where values land
  uint32_t max_attempts = 0;                 // 0: ClientConfig::max_attempts
};

/// A key still to send; `ask` is the node an ASK redirection named for this one attempt.
struct Item {
  size_t index = 0;
  NodePool* ask = nullptr;
};

/// What one node's share of a round left to do.
struct RoundResult {
  std::vector<Item> retry;
  bool refresh = false;  // a MOVED or a lost connection: the slot map is stale
  bool backoff = false;  // the cluster asked to wait (TRYAGAIN, CLUSTERDOWN) or a node was lost
};

struct ClusterClient::Impl {
  explicit Impl(ClientConfig c);

  /// The pool for an endpoint, made on first use (pools live as long as the client).
  NodePool* node(const Endpoint& endpoint);
  NodePool* owner(uint16_t slot) const;
  void set_owner(uint16_t slot, NodePool* pool);
  [[nodiscard]] Status refresh(bool force);
  [[nodiscard]] Status refresh_from(NodePool& pool);
  [[nodiscard]] std::vector<KeyOutcome> run(const Request& request);
  /// Sends `items` to `pool` over one connection, pipelined, and sorts out every reply.
  RoundResult send(NodePool& pool, std::span<const Item> items, const Request& request,
                   std::vector<KeyOutcome>& out);

  ClientConfig config;
  NodePool::Settings settings;
  mutable std::mutex nodes_mu;
  std::map<std::string, std::unique_ptr<NodePool>> nodes;  // guarded by nodes_mu
  mutable std::shared_mutex slots_mu;
  std::array<NodePool*, kSlotCount> slots{};  // guarded by slots_mu
  std::atomic<bool> standalone{false};
  std::mutex refresh_mu;
  std::chrono::steady_clock::time_point last_refresh{};  // guarded by refresh_mu
  std::atomic<uint64_t> moved{0}, asks{0}, refreshes{0}, retries{0};
};

}  // namespace kvtier::remote
