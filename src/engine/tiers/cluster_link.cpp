// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/tiers/cluster_link.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "remote/credentials.hpp"
#include "remote/endpoint.hpp"

namespace kvtier {
namespace {

// How often a cluster that was unreachable is dialled again: rare enough that a dead cluster costs
// restores nothing but a failed connect now and then.
constexpr std::chrono::seconds kReconnectInterval{2};

}  // namespace

std::string remote_key(const Key128& key) { return "kvtier:" + key.hex(); }

Result<std::unique_ptr<ClusterLink>> ClusterLink::open(const RemoteOptions& options,
                                                       const Logger& log) {
  remote::ClientConfig config;
  auto seeds = remote::parse_seeds(options.seeds);
  if (!seeds) return fail(seeds.error().with_context("Options::remote.seeds"));
  config.seeds = std::move(*seeds);
  auto password = remote::read_password(options.password_env, options.password_file);
  if (!password) return fail(password.error());
  config.password = std::move(*password);
  if (options.queue_records == 0 || options.queue_bytes == 0 || options.connect_timeout_ms == 0 ||
      options.command_timeout_ms == 0 || options.connections_per_node == 0) {
    return fail(ErrorCode::kInvalidArgument,
                "Options::remote: queue_records, queue_bytes, timeouts and connections_per_node "
                "must be > 0");
  }
  config.timeouts.connect = std::chrono::milliseconds(options.connect_timeout_ms);
  config.timeouts.command = std::chrono::milliseconds(options.command_timeout_ms);
  config.connections_per_node = options.connections_per_node;
  std::unique_ptr<ClusterLink> tier(
      new ClusterLink(std::move(config), std::chrono::seconds(options.ttl_seconds),
                      options.queue_records, options.queue_bytes, log));
  auto client = remote::ClusterClient::create(tier->config_);
  if (client) {
    tier->client_ = std::move(*client);
    tier->set_reason("ok");
  } else if (client.error().code() == ErrorCode::kIo) {
    KVTIER_LOG(log, kWarn, "remote tier unreachable at open, running local-only: {}",
               client.error().message());
    tier->set_reason("unreachable: " + client.error().message());
    tier->next_connect_ = std::chrono::steady_clock::now() + kReconnectInterval;
  } else {
    return fail(client.error().with_context("remote tier"));
  }
  return tier;
}

ClusterLink::ClusterLink(remote::ClientConfig config, std::chrono::milliseconds ttl,
                         uint64_t queue_bound, uint64_t queue_bytes, const Logger& log)
    : config_(std::move(config)),
      ttl_(ttl),
      queue_bound_(queue_bound),
      queue_bytes_bound_(queue_bytes),
      log_(log) {
  worker_ = std::thread([this] { run(); });
}

ClusterLink::~ClusterLink() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void ClusterLink::set_reason(std::string reason) {
  std::lock_guard lock(mu_);
  reason_ = std::move(reason);
}

std::shared_ptr<remote::ClusterClient> ClusterLink::client() {
  std::unique_lock lock(mu_);
  if (client_ || std::chrono::steady_clock::now() < next_connect_) return client_;
  next_connect_ = std::chrono::steady_clock::now() + kReconnectInterval;
  lock.unlock();
  auto client = remote::ClusterClient::create(config_);
  lock.lock();
  if (client) {
    client_ = std::move(*client);
    reason_ = "ok";
  } else {
    reason_ = "unreachable: " + client.error().message();
  }
  return client_;
}

std::string ClusterLink::reason() const {
  std::lock_guard lock(mu_);
  return reason_;
}

void ClusterLink::note(const std::vector<remote::KeyOutcome>& outcomes) {
  for (const auto& o : outcomes) {
    if (o.state != remote::KeyState::kFailed) continue;
    set_reason(o.error.to_string());
    return;
  }
  if (!outcomes.empty()) set_reason("ok");
}

bool ClusterLink::post(uint64_t records, uint64_t bytes, std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || queued_records_ + records > queue_bound_ ||
        queued_bytes_ + bytes > queue_bytes_bound_) {
      counters.remote_write_drops += records;
      return false;
    }
    queued_records_ += records;
    queued_bytes_ += bytes;
    queue_.push_back(Work{records, bytes, std::move(work)});
  }
  wake_.notify_one();
  return true;
}

bool ClusterLink::post_in_order(std::span<const uint64_t> held,
                                const std::function<std::function<void()>(size_t, size_t)>& make) {
  // A quarter: the worker runs the first groups while the queue still has room for the next.
  const uint64_t most_records = std::max<uint64_t>(1, queue_bound_ / 4);
  const uint64_t most_bytes = queue_bytes_bound_ / 4;
  for (size_t begin = 0; begin < held.size();) {
    size_t end = begin + 1;
    uint64_t bytes = held[begin];
    while (end < held.size() && end - begin < most_records && bytes + held[end] <= most_bytes)
      bytes += held[end++];
    if (!post(end - begin, bytes, make(begin, end))) {
      counters.remote_write_drops += held.size() - end;
      return false;
    }
    begin = end;
  }
  return true;
}

void ClusterLink::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to write
    Work work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    work.run();
    work.run = nullptr;  // what it held is freed before it stops counting
    lock.lock();
    queued_records_ -= work.records;
    queued_bytes_ -= work.bytes;
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void ClusterLink::drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void ClusterLink::fill_stats(Stats& stats) const {
  {
    std::lock_guard lock(mu_);
    stats.remote = reason_;
    stats.remote_pending = queued_records_;
  }
  counters.fill(stats);
}

}  // namespace kvtier
