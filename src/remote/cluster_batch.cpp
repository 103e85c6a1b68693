// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// One batch of GETs or SETs: route, pipeline per node over parallel connections, follow
// redirections, retry what a failure left, for at most max_attempts rounds.
#include <algorithm>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "api/try.hpp"
#include "remote/cluster_impl.hpp"
#include "remote/topology.hpp"

namespace kvtier::remote {
namespace {

// Below this many keys per connection, another connection costs more than it brings.
constexpr size_t kMinKeysPerConnection = 4;

bool starts_with_word(std::string_view text, std::string_view word) {
  return text.starts_with(word) && (text.size() == word.size() || text[word.size()] == ' ');
}

Status append_command(Connection& connection, const Item& item, const Request& request) {
  if (item.ask != nullptr) {
    const std::string_view asking[] = {"ASKING"};
    KVTIER_TRY(connection.append(asking));
  }
  const std::string_view key = request.keys[item.index];
  if (request.op == Request::Op::kGet) {
    const std::string_view argv[] = {"GET", key};
    return connection.append(argv);
  }
  if (request.op == Request::Op::kStrlen) {
    const std::string_view argv[] = {"STRLEN", key};
    return connection.append(argv);
  }
  const auto& value = request.values[item.index];
  const std::string_view bytes(reinterpret_cast<const char*>(value.data()), value.size());
  if (request.ttl_ms.empty()) {
    const std::string_view argv[] = {"SET", key, bytes};
    return connection.append(argv);
  }
  const std::string_view argv[] = {"SET", key, bytes, "PX", request.ttl_ms};
  return connection.append(argv);
}

}  // namespace

namespace {

/// Sorts out one reply; returns false when the key must be sent again.
struct ReplyHandler {
  ClusterClient::Impl& impl;
  const Request& request;
  std::vector<KeyOutcome>& out;
  RoundResult& result;
  const Endpoint& asked;

  void handle(const Item& item, ReplyPtr& owned, ValueBuffer& landed) {
    const redisReply& reply = *owned;
    KeyOutcome& outcome = out[item.index];
    if (reply.type == REDIS_REPLY_STRING && request.op == Request::Op::kGet) {
      if (reply.str == nullptr && request.owned_sink != nullptr) {  // landed in caller memory
        (*request.owned_sink)(item.index, OwnedValue{landed.bytes, std::move(landed.owner)});
        outcome = KeyOutcome{KeyState::kDone, {}};
        return;
      }
      const auto bytes = std::as_bytes(std::span(reply.str, reply.len));
      if (request.owned_sink != nullptr) {
        (*request.owned_sink)(item.index,
                              OwnedValue{bytes, std::shared_ptr<const void>(std::move(owned))});
      } else {
        (*request.sink)(item.index, bytes);
      }
      outcome = KeyOutcome{KeyState::kDone, {}};
    } else if (reply.type == REDIS_REPLY_NIL) {
      outcome = KeyOutcome{KeyState::kAbsent, {}};
    } else if (reply.type == REDIS_REPLY_STATUS && request.op == Request::Op::kSet) {
      outcome = KeyOutcome{KeyState::kDone, {}};
    } else if (reply.type == REDIS_REPLY_INTEGER && request.op == Request::Op::kStrlen) {
      // STRLEN answers 0 for a missing key: no value, as far as a restore is concerned.
      const auto size = static_cast<uint64_t>(std::max<long long>(reply.integer, 0));
      outcome = KeyOutcome{size > 0 ? KeyState::kDone : KeyState::kAbsent, {}, size};
    } else if (reply.type == REDIS_REPLY_ERROR) {
      handle_error(item, reply_text(reply));
    } else {
      outcome = KeyOutcome{KeyState::kFailed,
                           Status(ErrorCode::kIo, fmt::format("redis {}: unexpected reply type {}",
                                                              asked.to_string(), reply.type))};
    }
  }

  void handle_error(const Item& item, std::string_view text) {
    KeyOutcome& outcome = out[item.index];
    outcome =
        KeyOutcome{KeyState::kFailed,
                   Status(ErrorCode::kIo, fmt::format("redis {}: {}", asked.to_string(), text))};
    if (starts_with_word(text, "MOVED") || starts_with_word(text, "ASK")) {
      auto redirect = parse_redirect(text, asked);
      if (!redirect) return;
      NodePool* target = impl.node(redirect->target);
      if (redirect->ask) {
        impl.asks.fetch_add(1, std::memory_order_relaxed);
        result.retry.push_back(Item{item.index, target});
      } else {
        // The specification's advice: fix this slot now, and refresh the whole map soon, since
        // one MOVED usually means many slots moved.
        impl.moved.fetch_add(1, std::memory_order_relaxed);
        impl.set_owner(redirect->slot, target);
        result.retry.push_back(Item{item.index, nullptr});
        result.refresh = true;
      }
    } else if (starts_with_word(text, "TRYAGAIN") || starts_with_word(text, "CLUSTERDOWN") ||
               starts_with_word(text, "LOADING") || starts_with_word(text, "MASTERDOWN")) {
      result.retry.push_back(Item{item.index, nullptr});
      result.backoff = true;
      result.refresh = true;
    } else if (starts_with_word(text, "NOAUTH") || starts_with_word(text, "WRONGPASS") ||
               starts_with_word(text, "NOPERM")) {
      outcome.error = Status(ErrorCode::kPermission, outcome.error.message());
    }
  }
};

}  // namespace

RoundResult ClusterClient::Impl::send(NodePool& pool, std::span<const Item> items,
                                      const Request& request, std::vector<KeyOutcome>& out) {
  RoundResult result;
  auto lost = [&](size_t from, const Status& why) {
    // A refused password will be refused again: only a lost connection is worth another round.
    const bool retry = why.code() != ErrorCode::kPermission;
    for (size_t i = from; i < items.size(); ++i) {
      out[items[i].index] = KeyOutcome{KeyState::kFailed, why};
      if (retry) result.retry.push_back(Item{items[i].index, nullptr});
    }
    result.refresh = true;
    result.backoff = true;
    return result;
  };
  auto connection = pool.acquire();
  if (!connection) return lost(0, connection.error());
  for (const Item& item : items) {
    Status status = append_command(**connection, item, request);
    if (!status.ok()) {
      pool.release(std::move(*connection));
      return lost(0, status);
    }
  }
  ReplyHandler handler{*this, request, out, result, pool.endpoint()};
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].ask != nullptr) {
      auto asking = (*connection)->read();  // +OK; a failure shows on the next read too
      if (!asking) {
        pool.release(std::move(*connection));
        return lost(i, asking.error());
      }
    }
    ValueBuffer landed;
    auto reply = request.allocate != nullptr
                     ? (*connection)->read_value(*request.allocate, items[i].index, landed)
                     : (*connection)->read();
    if (!reply) {
      pool.release(std::move(*connection));
      return lost(i, reply.error());
    }
    handler.handle(items[i], *reply, landed);
  }
  pool.release(std::move(*connection));
  return result;
}

namespace {

/// A node's share of a round, cut into pieces that go over separate connections at once.
struct Task {
  NodePool* pool = nullptr;
  std::vector<Item> items;
  RoundResult result;
};

std::vector<Task> plan_round(ClusterClient::Impl& impl, const Request& request,
                             const std::vector<Item>& pending, std::vector<KeyOutcome>& out) {
  std::unordered_map<NodePool*, std::vector<Item>> by_node;
  for (const Item& item : pending) {
    NodePool* pool =
        item.ask != nullptr ? item.ask : impl.owner(key_slot(request.keys[item.index]));
    if (pool == nullptr) {
      out[item.index] =
          KeyOutcome{KeyState::kFailed,
                     Status(ErrorCode::kIo, fmt::format("redis: slot {} is served by no node",
                                                        key_slot(request.keys[item.index])))};
      continue;
    }
    by_node[pool].push_back(item);
  }
  std::vector<Task> tasks;
  for (auto& [pool, items] : by_node) {
    const size_t pieces = std::clamp<size_t>(items.size() / kMinKeysPerConnection, 1,
                                             impl.config.connections_per_node);
    // Round-robin, so each piece carries a like share of large and small values.
    const size_t first = tasks.size();
    for (size_t p = 0; p < pieces; ++p) tasks.push_back(Task{pool, {}, {}});
    for (size_t i = 0; i < items.size(); ++i) tasks[first + i % pieces].items.push_back(items[i]);
  }
  return tasks;
}

void run_tasks(ClusterClient::Impl& impl, const Request& request, std::vector<Task>& tasks,
               std::vector<KeyOutcome>& out) {
  std::vector<std::jthread> threads;
  threads.reserve(tasks.size());
  for (size_t t = 1; t < tasks.size(); ++t) {
    threads.emplace_back(
        [&, t] { tasks[t].result = impl.send(*tasks[t].pool, tasks[t].items, request, out); });
  }
  if (!tasks.empty()) tasks[0].result = impl.send(*tasks[0].pool, tasks[0].items, request, out);
}

}  // namespace

std::vector<KeyOutcome> ClusterClient::Impl::run(const Request& request) {
  std::vector<KeyOutcome> out(request.keys.size());
  std::vector<Item> pending(request.keys.size());
  for (size_t i = 0; i < pending.size(); ++i) pending[i].index = i;
  const uint32_t attempts = request.max_attempts > 0
                                ? std::min(request.max_attempts, config.max_attempts)
                                : config.max_attempts;
  for (uint32_t attempt = 0; attempt < attempts && !pending.empty(); ++attempt) {
    if (attempt > 0) retries.fetch_add(pending.size(), std::memory_order_relaxed);
    std::vector<Task> tasks = plan_round(*this, request, pending, out);
    run_tasks(*this, request, tasks, out);
    pending.clear();
    bool refresh_needed = false;
    bool backoff_needed = false;
    for (Task& task : tasks) {
      pending.insert(pending.end(), task.result.retry.begin(), task.result.retry.end());
      refresh_needed |= task.result.refresh;
      backoff_needed |= task.result.backoff;
    }
    if (pending.empty() || attempt + 1 == attempts) break;
    if (backoff_needed) {
      std::this_thread::sleep_for(
          std::min(config.backoff_max, config.backoff_min * (1u << attempt)));
    }
    // A failed refresh leaves the old map; the next round's errors say what is wrong.
    if (refresh_needed) (void)refresh(false);
  }
  return out;
}

}  // namespace kvtier::remote
