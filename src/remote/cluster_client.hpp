// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A Redis Cluster (or standalone Redis/Valkey) client for batches of binary GETs and SETs.
// This header names no hiredis type, so the engine includes it whether or not hiredis was found;
// without hiredis, create() returns kNotSupported.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtier/status.hpp"
#include "remote/endpoint.hpp"

namespace kvtier::remote {

struct ClientConfig {
  std::vector<Endpoint> seeds;        // any reachable one yields the whole topology
  std::string password;               // "" sends no AUTH; never logged
  Timeouts timeouts;                  // per connect and per command
  uint32_t connections_per_node = 4;  // a batch's keys for one node are spread over this many
  uint32_t max_attempts = 6;          // rounds of redirections and retries per batch
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{1000};
};

/// What one key of a batch came to.
enum class KeyState : uint8_t {
  kDone,    ///< GET: value delivered to the sink; SET: stored; STRLEN: `size` holds its length
  kAbsent,  ///< GET, STRLEN: no such key (or, for STRLEN, an empty value)
  kFailed,  ///< the node could not be reached or answered an error: `error` says which
};
struct KeyOutcome {
  KeyState state = KeyState::kFailed;
  Status error;
  uint64_t size = 0;  ///< STRLEN: the value's length in bytes
};

/// Receives a GET's value, from worker threads, once per found key (never twice for one index;
/// concurrently for different indexes). The bytes are valid only during the call.
using ValueSink = std::function<void(size_t index, std::span<const std::byte> value)>;

/// A GET's value where the client received it, handed over without a copy: `bytes` stay valid as
/// long as `owner` (the reply) is held.
struct OwnedValue {
  std::span<const std::byte> bytes;
  std::shared_ptr<const void> owner;
};
/// Receives a GET's value to keep; called as a ValueSink is.
using OwnedValueSink = std::function<void(size_t index, OwnedValue value)>;

/// Memory for a GET's value: exactly `len` writable bytes and what keeps them, or an empty span.
struct ValueBuffer {
  std::span<std::byte> bytes;
  std::shared_ptr<const void> owner;
};
/// Where the value of key `index`, `len` bytes long, should land as it is parsed off the socket
/// (one copy, out of hiredis's read buffer); an empty span lets hiredis allocate it as usual.
/// Called from worker threads, concurrently.
using ValueAllocator = std::function<ValueBuffer(size_t index, size_t len)>;

struct ClientCounters {
  uint64_t moved = 0;      // MOVED redirections followed
  uint64_t ask = 0;        // ASK redirections followed
  uint64_t refreshes = 0;  // slot maps fetched
  uint64_t connects = 0;   // connections opened (the first ones and reconnects)
  uint64_t retries = 0;    // keys sent again after an error or a redirection
};

/// @brief Routes each key to the master serving its hash slot, pipelines a batch per node over
/// several connections in parallel, follows MOVED (updating the slot map, then refreshing it)
/// and ASK (with ASKING), refreshes the map after a connection failure, and backs off from
/// unreachable nodes. Failures are per key and never throw. Thread-safe: batches may run
/// concurrently from any threads.
class ClusterClient {
 public:
  /// Connects to the first reachable seed, authenticates and reads the topology (CLUSTER SLOTS;
  /// a server without cluster support is used as a standalone node). No seed reachable is kIo; a
  /// rejected password is kPermission.
  [[nodiscard]] static Result<std::unique_ptr<ClusterClient>> create(ClientConfig config);
  ~ClusterClient();
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  /// GETs every key; each found value goes to `sink`.
  [[nodiscard]] std::vector<KeyOutcome> get(std::span<const std::string> keys,
                                            const ValueSink& sink);
  /// GETs every key; each found value goes to `sink` as the reply holding it (no copy), for a
  /// caller that keeps values past the call (a restore checks, places and promotes them).
  [[nodiscard]] std::vector<KeyOutcome> get_owned(std::span<const std::string> keys,
                                                  const OwnedValueSink& sink,
                                                  const ValueAllocator* allocate = nullptr);
  /// SETs keys[i] to values[i], with a time to live when ttl > 0.
  [[nodiscard]] std::vector<KeyOutcome> set(std::span<const std::string> keys,
                                            std::span<const std::span<const std::byte>> values,
                                            std::chrono::milliseconds ttl);
  /// STRLENs every key: the size of each value without fetching it (a lookup's existence check),
  /// in at most `max_attempts` rounds (0: the client's own), so a caller that must answer quickly
  /// can give up early while a node is down.
  [[nodiscard]] std::vector<KeyOutcome> sizes(std::span<const std::string> keys,
                                              uint32_t max_attempts = 0);
  /// Re-reads the slot map now.
  [[nodiscard]] Status refresh();

  [[nodiscard]] bool standalone() const;
  [[nodiscard]] ClientCounters counters() const;

  struct Impl;

 private:
  explicit ClusterClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::remote
