// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// One blocking hiredis connection to one Redis node, with timeouts and AUTH. Only src/remote/*.cpp
// include this header (it names hiredis types); the rest of kvtier sees ClusterClient.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kvtier/status.hpp"
#include "remote/cluster_client.hpp"
#include "remote/endpoint.hpp"

namespace kvtier::remote {

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

/// @brief Sole owner of a redisContext. Commands are pipelined: append() any number, then
/// read() as many replies. After any I/O error or timeout the connection is broken() for good
/// (a half-read pipeline cannot be resynchronized) and its owner drops it. Not thread-safe.
class Connection {
 public:
  /// Connects with the connect timeout, sets the command timeout and, when `password` is
  /// non-empty, authenticates. A rejected password is kPermission.
  [[nodiscard]] static Result<std::unique_ptr<Connection>> open(const Endpoint& endpoint,
                                                                const Timeouts& timeouts,
                                                                const std::string& password);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Queues one command (binary-safe arguments) in the output buffer.
  [[nodiscard]] Status append(std::span<const std::string_view> argv);
  /// Sends what is queued (first call) and reads the next reply.
  [[nodiscard]] Result<ReplyPtr> read();
  /// Reads the next reply, which answers a GET of key `index`: a value goes into the memory
  /// `allocate` gives for it, handed back in `landed`, and the reply's str is null; where it gives
  /// none, the reply holds the value as read() does.
  [[nodiscard]] Result<ReplyPtr> read_value(const ValueAllocator& allocate, size_t index,
                                            ValueBuffer& landed);
  /// append() then read().
  [[nodiscard]] Result<ReplyPtr> command(std::span<const std::string_view> argv);

  [[nodiscard]] bool broken() const { return broken_; }
  [[nodiscard]] const Endpoint& endpoint() const { return endpoint_; }

 private:
  Connection(redisContext* context, Endpoint endpoint);
  Status context_error(std::string_view what);

  /// hiredis's reply constructors, but top-level string replies land where `allocate` says
  /// (reader_hook.cpp). Reached through the reader's privdata, which points here.
  struct ReaderHook {
    const redisReplyObjectFunctions* original = nullptr;
    redisReplyObjectFunctions functions{};
    const ValueAllocator* allocate = nullptr;  // set only during read_value()
    size_t index = 0;
    ValueBuffer landed;
  };
  static void* create_string(const redisReadTask* task, char* str, size_t len);

  redisContext* context_;
  Endpoint endpoint_;
  std::unique_ptr<ReaderHook> hook_;
  bool broken_ = false;
};

/// The text of an error or status reply.
[[nodiscard]] std::string_view reply_text(const redisReply& reply);

}  // namespace kvtier::remote
