// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "rank_channel.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier::seed {

Result<std::unique_ptr<RankChannel>> RankChannel::spawn(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    return fail(ErrorCode::kIo, fmt::format("pipe: {}", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return fail(ErrorCode::kIo, fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "kvtier: cannot start %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  std::unique_ptr<RankChannel> ch(new RankChannel);
  ch->pid_ = pid;
  ch->to_ = ::fdopen(in[1], "w");
  ch->from_ = ::fdopen(out[0], "r");
  return ch;
}

RankChannel::~RankChannel() {
  if (to_ != nullptr) std::fclose(to_);
  if (from_ != nullptr) std::fclose(from_);
  if (pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

Status RankChannel::send(const nlohmann::ordered_json& command) {
  const std::string line = command.dump() + "\n";
  if (std::fputs(line.c_str(), to_) < 0 || std::fflush(to_) != 0) {
    return {ErrorCode::kIo,
            fmt::format("rank process {} is gone (write: {})", pid_, std::strerror(errno))};
  }
  return {};
}

Result<nlohmann::ordered_json> RankChannel::receive() {
  std::string line;
  for (int c = std::fgetc(from_); c != EOF && c != '\n'; c = std::fgetc(from_))
    line.push_back(static_cast<char>(c));
  if (line.empty())
    return fail(ErrorCode::kIo, fmt::format("rank process {} exited without replying", pid_));
  auto reply = nlohmann::ordered_json::parse(line, nullptr, false);
  if (reply.is_discarded())
    return fail(ErrorCode::kInternal, fmt::format("rank process {}: bad reply '{}'", pid_, line));
  if (!reply.value("ok", false)) {
    const auto code =
        static_cast<ErrorCode>(reply.value("code", static_cast<int>(ErrorCode::kInternal)));
    return fail(code, fmt::format("rank process {}: {}", pid_, reply.value("error", "failed")));
  }
  return reply;
}

Result<std::vector<nlohmann::ordered_json>> broadcast(
    std::vector<std::unique_ptr<RankChannel>>& ranks, const nlohmann::ordered_json& command,
    bool first_alone) {
  std::vector<nlohmann::ordered_json> replies;
  Status first;
  auto collect = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      // Every reply is read even after a failure, so that the next command lines up.
      auto reply = ranks[i]->receive();
      if (reply)
        replies.push_back(std::move(*reply));
      else if (first.ok())
        first = reply.error();
    }
  };
  size_t sent = 0;
  if (first_alone && !ranks.empty()) {
    KVTIER_TRY(ranks[0]->send(command));
    collect(0, 1);
    sent = 1;
  }
  for (size_t i = sent; i < ranks.size(); ++i) KVTIER_TRY(ranks[i]->send(command));
  collect(sent, ranks.size());
  if (!first.ok()) return fail(first);
  return replies;
}

}  // namespace kvtier::seed
