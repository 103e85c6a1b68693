// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "kvtier/options.hpp"

namespace kvtier {

/// @brief Where an engine's log lines go: the sink from Options, or stderr.
/// Thread-safe when the sink is (the stderr sink writes one line per call).
class Logger {
 public:
  Logger() = default;
  Logger(LogSink sink, LogLevel level) : sink_(std::move(sink)), level_(level) {}

  [[nodiscard]] bool enabled(LogLevel level) const {
    return level >= level_ && level != LogLevel::kOff;
  }
  void write(LogLevel level, std::string_view line) const;

 private:
  LogSink sink_;
  LogLevel level_ = LogLevel::kWarn;
};

std::string_view log_level_name(LogLevel level);

}  // namespace kvtier

/// KVTIER_LOG(logger, kWarn, "segment {} dropped", id): formats only when the level is enabled.
#define KVTIER_LOG(logger, level, ...)                                     \
  do {                                                                     \
    if ((logger).enabled(::kvtier::LogLevel::level)) {                     \
      (logger).write(::kvtier::LogLevel::level, fmt::format(__VA_ARGS__)); \
    }                                                                      \
  } while (0)
