// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/log.hpp"

#include <cstdio>

namespace kvtier {

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      return "off";
  }
  return "?";
}

void Logger::write(LogLevel level, std::string_view line) const {
  if (sink_) {
    sink_(level, line);
    return;
  }
  // One fprintf per line keeps lines from concurrent threads whole.
  std::fprintf(stderr, "kvtier %s: %.*s\n", std::string(log_level_name(level)).c_str(),
               static_cast<int>(line.size()), line.data());
}

}  // namespace kvtier
