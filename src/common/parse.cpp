// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Text to sizes and I/O paths (declared in kvtier/options.hpp): for the environment (env.cpp), the
// options and the tools alike, so that none of them calls up into the engine.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/try.hpp"
#include "kvtier/options.hpp"

namespace kvtier {

std::string_view io_path_name(IoPath path) {
  switch (path) {
    case IoPath::kAuto:
      return "auto";
    case IoPath::kDirect:
      return "direct";
    case IoPath::kBuffered:
      return "buffered";
    case IoPath::kGds:
      return "gds";
  }
  return "?";
}

Result<IoPath> parse_io_path(std::string_view name) {
  if (name == "auto") return IoPath::kAuto;
  if (name == "direct" || name == "posix") return IoPath::kDirect;
  if (name == "buffered") return IoPath::kBuffered;
  if (name == "gds") return IoPath::kGds;
  return fail(
      ErrorCode::kInvalidArgument,
      fmt::format("I/O path '{}': expected auto, posix (or direct), buffered or gds", name));
}

Result<uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return fail(ErrorCode::kInvalidArgument, "empty size");
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || !std::isfinite(value) || value < 0) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("size '{}' is not a non-negative number", text));
  }
  std::string_view suffix(end);
  double scale = 1;
  if (suffix == "K" || suffix == "KiB" || suffix == "k")
    scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB")
    scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B") {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("size '{}': unknown unit '{}'", text, suffix));
  }
  double bytes = value * scale;
  if (bytes >= 18446744073709551616.0) {
    return fail(ErrorCode::kInvalidArgument, fmt::format("size '{}' overflows 64 bits", text));
  }
  return static_cast<uint64_t>(bytes);
}

}  // namespace kvtier
