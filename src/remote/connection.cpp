// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "remote/connection.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier::remote {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

}  // namespace

std::string_view reply_text(const redisReply& reply) {
  if (reply.str == nullptr) return {};
  return {reply.str, reply.len};
}

Result<std::unique_ptr<Connection>> Connection::open(const Endpoint& endpoint,
                                                     const Timeouts& timeouts,
                                                     const std::string& password) {
  redisContext* context =
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, to_timeval(timeouts.connect));
  if (context == nullptr) {
    return fail(ErrorCode::kIo,
                fmt::format("redis {}: cannot allocate a connection", endpoint.to_string()));
  }
  std::unique_ptr<Connection> connection(new Connection(context, endpoint));
  if (context->err != 0) return fail(connection->context_error("connect"));
  if (redisSetTimeout(context, to_timeval(timeouts.command)) != REDIS_OK) {
    return fail(connection->context_error("set timeout"));
  }
  if (!password.empty()) {
    const std::string_view argv[] = {"AUTH", password};
    KVTIER_ASSIGN_OR_RETURN(ReplyPtr reply, connection->command(argv));
    if (reply->type == REDIS_REPLY_ERROR) {
      // The server's text (WRONGPASS ...) never contains the password; still, only its code is
      // kept.
      return fail(ErrorCode::kPermission,
                  fmt::format("redis {}: AUTH rejected ({})", endpoint.to_string(),
                              reply_text(*reply).substr(0, reply_text(*reply).find(' '))));
    }
  }
  return connection;
}

Connection::Connection(redisContext* context, Endpoint endpoint)
    : context_(context), endpoint_(std::move(endpoint)), hook_(std::make_unique<ReaderHook>()) {
  // The reader's constructors are swapped for ones that can land a GET's value in caller memory;
  // everything else they build as before.
  if (context_->reader != nullptr && context_->reader->fn != nullptr) {
    hook_->original = context_->reader->fn;
    hook_->functions = *hook_->original;
    hook_->functions.createString = &Connection::create_string;
    context_->reader->fn = &hook_->functions;
    context_->reader->privdata = hook_.get();
  }
}

Connection::~Connection() { redisFree(context_); }

void* Connection::create_string(const redisReadTask* task, char* str, size_t len) {
  auto* hook = static_cast<ReaderHook*>(task->privdata);
  if (hook->allocate != nullptr && task->parent == nullptr && task->type == REDIS_REPLY_STRING) {
    ValueBuffer buffer = (*hook->allocate)(hook->index, len);
    if (buffer.bytes.size() == len) {
      // A reply without str (freeReplyObject frees a null str as nothing); the bytes are in
      // `landed` until read_value() hands them over.
      auto* reply = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
      if (reply == nullptr) return nullptr;
      reply->type = REDIS_REPLY_STRING;
      reply->len = len;
      if (len > 0) std::memcpy(buffer.bytes.data(), str, len);
      hook->landed = std::move(buffer);
      return reply;
    }
  }
  return hook->original->createString(task, str, len);
}

Status Connection::context_error(std::string_view what) {
  broken_ = true;
  const int native = context_->err == REDIS_ERR_IO ? errno : 0;
  const std::string_view detail = context_->errstr;
  return Status(ErrorCode::kIo,
                fmt::format("redis {}: {}: {}", endpoint_.to_string(), what, detail), native);
}

Status Connection::append(std::span<const std::string_view> argv) {
  if (broken_)
    return Status(ErrorCode::kIo,
                  fmt::format("redis {}: connection broken", endpoint_.to_string()));
  std::vector<const char*> pointers;
  std::vector<size_t> lengths;
  pointers.reserve(argv.size());
  lengths.reserve(argv.size());
  for (std::string_view arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), pointers.data(),
                             lengths.data()) != REDIS_OK) {
    return context_error("append");
  }
  return {};
}

Result<ReplyPtr> Connection::read() {
  if (broken_)
    return fail(ErrorCode::kIo, fmt::format("redis {}: connection broken", endpoint_.to_string()));
  void* reply = nullptr;
  if (redisGetReply(context_, &reply) != REDIS_OK || reply == nullptr) {
    return fail(context_error("read"));
  }
  return ReplyPtr(static_cast<redisReply*>(reply));
}

Result<ReplyPtr> Connection::read_value(const ValueAllocator& allocate, size_t index,
                                        ValueBuffer& landed) {
  if (hook_->original == nullptr) return read();
  hook_->allocate = &allocate;
  hook_->index = index;
  auto reply = read();
  hook_->allocate = nullptr;
  landed = std::move(hook_->landed);
  hook_->landed = {};
  return reply;
}

Result<ReplyPtr> Connection::command(std::span<const std::string_view> argv) {
  KVTIER_TRY(append(argv));
  return read();
}

}  // namespace kvtier::remote
