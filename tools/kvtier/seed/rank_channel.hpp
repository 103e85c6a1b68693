// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The parent's side of a rank process: spawn it, send a command, read its one-line JSON reply.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtier/status.hpp"

namespace kvtier::seed {

class RankChannel {
 public:
  /// Starts `argv` (argv[0] is the executable) with pipes on its stdin and stdout; its stderr is
  /// ours.
  [[nodiscard]] static Result<std::unique_ptr<RankChannel>> spawn(
      const std::vector<std::string>& argv);
  ~RankChannel();  // closes stdin (the rank exits) and reaps it

  [[nodiscard]] Status send(const nlohmann::ordered_json& command);
  /// The next reply; kIo when the rank died. A reply with ok=false becomes its error.
  [[nodiscard]] Result<nlohmann::ordered_json> receive();
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  RankChannel() = default;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

/// Sends `command` to every rank, then collects every reply (so the ranks work concurrently).
/// `first_alone`: rank 0 answers before the others are sent it (an open: the writer of a shared
/// store, and the probe of its drives, before the ranks that follow them).
[[nodiscard]] Result<std::vector<nlohmann::ordered_json>> broadcast(
    std::vector<std::unique_ptr<RankChannel>>& ranks, const nlohmann::ordered_json& command,
    bool first_alone = false);

}  // namespace kvtier::seed
