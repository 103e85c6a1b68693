// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cluster tier's link to the Redis Cluster: the connection (or why there is none), the
// background worker (write-behind and promotion) and its bounded queue, and the counters Stats
// reports. The tier itself is cluster.cpp; what it does, cluster_{restore,save,lookup}.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "common/keys.hpp"
#include "common/log.hpp"
#include "engine/counters.hpp"
#include "kvtier/options.hpp"
#include "kvtier/stats.hpp"
#include "remote/cluster_client.hpp"

namespace kvtier {

/// The cluster key of a record: its chained key, which already names model, geometry, rank,
/// world and tenant.
[[nodiscard]] std::string remote_key(const Key128& key);

/// @brief Connection, queue and counters of the cluster tier. Thread-safe.
class ClusterLink {
 public:
  /// Reads the password and connects. A bad seed list, an unreadable password source, a rejected
  /// password or a build without hiredis fail the open; an unreachable cluster does not: the
  /// engine runs local-only, says why in Stats, and tries again now and then.
  [[nodiscard]] static Result<std::unique_ptr<ClusterLink>> open(const RemoteOptions& options,
                                                                 const Logger& log);
  ~ClusterLink();
  ClusterLink(const ClusterLink&) = delete;
  ClusterLink& operator=(const ClusterLink&) = delete;

  /// The client, or null while the cluster is unreachable (a reconnect is tried at most once per
  /// kReconnectInterval).
  [[nodiscard]] std::shared_ptr<remote::ClusterClient> client();
  /// Runs `work` on the background worker unless `records` more, or the `bytes` it holds, would
  /// pass the queue's bounds, in which case they are counted as dropped. Never blocks. Whether it
  /// was queued.
  bool post(uint64_t records, uint64_t bytes, std::function<void()> work);
  /// Posts records `held` (the bytes each holds while queued) in consecutive groups of at most a
  /// quarter of the queue's bounds (one record at least), `make(begin, end)` making each group's
  /// work: a save or fetch of more records than the queue takes is queued from its first record
  /// on as far as there is room, not refused whole. After the first group refused, the rest are
  /// counted as dropped: a chain's later records are of no use without the earlier ones. Returns
  /// whether every group was queued.
  bool post_in_order(std::span<const uint64_t> held,
                     const std::function<std::function<void()>(size_t, size_t)>& make);
  /// Notes the outcome of a batch: per-key failures make the reason in Stats.
  void note(const std::vector<remote::KeyOutcome>& outcomes);

  [[nodiscard]] std::chrono::milliseconds ttl() const { return ttl_; }
  /// "ok", or why the last remote operation failed ("unreachable: ..." while there is no client).
  [[nodiscard]] std::string reason() const;
  void fill_stats(Stats& stats) const;
  /// Waits until the queue is empty and the worker idle (tests, and the engine's close).
  void drain();

  RemoteCounters counters;

 private:
  ClusterLink(remote::ClientConfig config, std::chrono::milliseconds ttl, uint64_t queue_bound,
              uint64_t queue_bytes, const Logger& log);
  void set_reason(std::string reason);
  void run();

  const remote::ClientConfig config_;
  const std::chrono::milliseconds ttl_;
  const uint64_t queue_bound_;
  const uint64_t queue_bytes_bound_;
  const Logger& log_;

  mutable std::mutex mu_;
  std::shared_ptr<remote::ClusterClient> client_;         // guarded by mu_
  std::chrono::steady_clock::time_point next_connect_{};  // guarded by mu_
  std::string reason_;                                    // guarded by mu_
  struct Work {
    uint64_t records = 0;
    uint64_t bytes = 0;  // what the work holds until it runs
    std::function<void()> run;
  };
  std::deque<Work> queue_;       // guarded by mu_
  uint64_t queued_records_ = 0;  // guarded by mu_
  uint64_t queued_bytes_ = 0;    // guarded by mu_
  bool busy_ = false;            // guarded by mu_
  bool stop_ = false;            // guarded by mu_
  std::condition_variable wake_, idle_;
  std::thread worker_;
};

}  // namespace kvtier
