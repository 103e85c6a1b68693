// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Topology: seeds, the slot map and its refresh. Batches are in cluster_batch.cpp.
#include <fmt/format.h>

#include "api/try.hpp"
#include "remote/cluster_impl.hpp"
#include "remote/topology.hpp"

namespace kvtier::remote {
namespace {

// A refresh asked for within this long of the last one reuses it: a failover makes every key of a
// batch fail at once, and one fetch of the map serves them all.
constexpr std::chrono::milliseconds kRefreshInterval{50};

}  // namespace

ClusterClient::Impl::Impl(ClientConfig c) : config(std::move(c)) {
  settings.timeouts = config.timeouts;
  settings.password = config.password;
  settings.max_idle = std::max<size_t>(2 * config.connections_per_node, 2);
  settings.backoff_min = config.backoff_min;
  settings.backoff_max = config.backoff_max;
}

NodePool* ClusterClient::Impl::node(const Endpoint& endpoint) {
  std::lock_guard lock(nodes_mu);
  auto& pool = nodes[endpoint.to_string()];
  if (!pool) pool = std::make_unique<NodePool>(endpoint, &settings);
  return pool.get();
}

NodePool* ClusterClient::Impl::owner(uint16_t slot) const {
  std::shared_lock lock(slots_mu);
  return slots[slot];
}

void ClusterClient::Impl::set_owner(uint16_t slot, NodePool* pool) {
  std::unique_lock lock(slots_mu);
  slots[slot] = pool;
}

Status ClusterClient::Impl::refresh_from(NodePool& pool) {
  KVTIER_ASSIGN_OR_RETURN(auto connection, pool.acquire());
  const std::string_view argv[] = {"CLUSTER", "SLOTS"};
  auto reply = connection->command(argv);
  pool.release(std::move(connection));
  if (!reply) return reply.error();
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    const std::string_view text = reply_text(**reply);
    if (text.find("cluster support disabled") == std::string_view::npos) {
      const ErrorCode code = text.starts_with("NOAUTH") ? ErrorCode::kPermission : ErrorCode::kIo;
      return Status(code,
                    fmt::format("redis {}: CLUSTER SLOTS: {}", pool.endpoint().to_string(), text));
    }
    // A standalone server: it serves every slot.
    standalone = true;
    std::unique_lock lock(slots_mu);
    slots.fill(&pool);
    return {};
  }
  KVTIER_ASSIGN_OR_RETURN(auto ranges, parse_cluster_slots(**reply, pool.endpoint()));
  std::array<NodePool*, kSlotCount> fresh{};
  for (const SlotRange& range : ranges) {
    NodePool* master = node(range.master);
    for (uint32_t s = range.first; s <= range.last; ++s) fresh[s] = master;
  }
  standalone = false;
  std::unique_lock lock(slots_mu);
  slots = fresh;
  return {};
}

Status ClusterClient::Impl::refresh(bool force) {
  std::lock_guard lock(refresh_mu);
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_refresh < kRefreshInterval) return {};
  // Ask the nodes we know (masters, replicas promoted since, seeds) until one answers.
  std::vector<NodePool*> candidates;
  {
    std::lock_guard nodes_lock(nodes_mu);
    for (auto& [name, pool] : nodes) candidates.push_back(pool.get());
  }
  std::string reasons;
  for (NodePool* pool : candidates) {
    Status status = refresh_from(*pool);
    if (status.ok()) {
      refreshes.fetch_add(1, std::memory_order_relaxed);
      last_refresh = std::chrono::steady_clock::now();
      return status;
    }
    if (status.code() == ErrorCode::kPermission) return status;
    reasons += (reasons.empty() ? "" : "; ") + status.message();
  }
  return Status(ErrorCode::kIo, fmt::format("redis: no node reachable ({})", reasons));
}

Result<std::unique_ptr<ClusterClient>> ClusterClient::create(ClientConfig config) {
  if (config.seeds.empty()) return fail(ErrorCode::kInvalidArgument, "remote: no seeds given");
  if (config.connections_per_node == 0 || config.max_attempts == 0) {
    return fail(ErrorCode::kInvalidArgument,
                "remote: connections per node and attempts must be >= 1");
  }
  auto impl = std::make_unique<Impl>(std::move(config));
  for (const Endpoint& seed : impl->config.seeds) impl->node(seed);
  KVTIER_TRY(impl->refresh(true));
  return std::unique_ptr<ClusterClient>(new ClusterClient(std::move(impl)));
}

ClusterClient::ClusterClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterClient::~ClusterClient() = default;

Status ClusterClient::refresh() { return impl_->refresh(true); }
bool ClusterClient::standalone() const { return impl_->standalone.load(); }

ClientCounters ClusterClient::counters() const {
  ClientCounters c;
  c.moved = impl_->moved.load(std::memory_order_relaxed);
  c.ask = impl_->asks.load(std::memory_order_relaxed);
  c.refreshes = impl_->refreshes.load(std::memory_order_relaxed);
  c.retries = impl_->retries.load(std::memory_order_relaxed);
  std::lock_guard lock(impl_->nodes_mu);
  for (const auto& [name, pool] : impl_->nodes) c.connects += pool->connects();
  return c;
}

std::vector<KeyOutcome> ClusterClient::get(std::span<const std::string> keys,
                                           const ValueSink& sink) {
  Request request;
  request.op = Request::Op::kGet;
  request.keys = keys;
  request.sink = &sink;
  return impl_->run(request);
}

std::vector<KeyOutcome> ClusterClient::get_owned(std::span<const std::string> keys,
                                                 const OwnedValueSink& sink,
                                                 const ValueAllocator* allocate) {
  Request request;
  request.op = Request::Op::kGet;
  request.keys = keys;
  request.owned_sink = &sink;
  request.allocate = allocate;
  return impl_->run(request);
}

std::vector<KeyOutcome> ClusterClient::sizes(std::span<const std::string> keys,
                                             uint32_t max_attempts) {
  Request request;
  request.op = Request::Op::kStrlen;
  request.keys = keys;
  request.max_attempts = max_attempts;
  return impl_->run(request);
}

std::vector<KeyOutcome> ClusterClient::set(std::span<const std::string> keys,
                                           std::span<const std::span<const std::byte>> values,
                                           std::chrono::milliseconds ttl) {
  if (values.size() != keys.size()) {
    return std::vector<KeyOutcome>(
        keys.size(), KeyOutcome{KeyState::kFailed, Status(ErrorCode::kInvalidArgument,
                                                          "remote set: one value per key")});
  }
  Request request;
  request.op = Request::Op::kSet;
  request.keys = keys;
  request.values = values;
  if (ttl.count() > 0) request.ttl_ms = std::to_string(ttl.count());
  return impl_->run(request);
}

}  // namespace kvtier::remote
