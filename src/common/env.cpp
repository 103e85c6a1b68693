// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/env.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/try.hpp"

namespace kvtier {
namespace {

Result<std::optional<uint64_t>> env_size(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::optional<uint64_t>();
  auto parsed = parse_size(value);
  if (!parsed) return fail(parsed.error().with_context(name));
  return std::optional<uint64_t>(*parsed);
}

Result<std::optional<LogLevel>> env_log_level() {
  const char* value = std::getenv("KVTIER_LOG_LEVEL");
  if (value == nullptr) return std::optional<LogLevel>();
  std::string_view v(value);
  if (v == "debug") return std::optional(LogLevel::kDebug);
  if (v == "info") return std::optional(LogLevel::kInfo);
  if (v == "warn") return std::optional(LogLevel::kWarn);
  if (v == "error") return std::optional(LogLevel::kError);
  if (v == "off") return std::optional(LogLevel::kOff);
  return fail(ErrorCode::kInvalidArgument,
              fmt::format("KVTIER_LOG_LEVEL={}: expected debug, info, warn, error or off", v));
}

}  // namespace

Result<uint64_t> parse_size(std::string_view text) {
  if (text.empty()) return fail(ErrorCode::kInvalidArgument, "empty size");
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || !std::isfinite(value) || value < 0) {
    return fail(ErrorCode::kInvalidArgument, fmt::format("size '{}' is not a non-negative number", text));
  }
  std::string_view suffix(end);
  double scale = 1;
  if (suffix == "K" || suffix == "KiB" || suffix == "k") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B") {
    return fail(ErrorCode::kInvalidArgument, fmt::format("size '{}': unknown unit '{}'", text, suffix));
  }
  double bytes = value * scale;
  if (bytes >= 18446744073709551616.0) {
    return fail(ErrorCode::kInvalidArgument, fmt::format("size '{}' overflows 64 bits", text));
  }
  return static_cast<uint64_t>(bytes);
}

Result<EnvOverrides> read_env_overrides() {
  EnvOverrides env;
  KVTIER_ASSIGN_OR_RETURN(env.log_level, env_log_level());
  if (const char* path = std::getenv("KVTIER_IO_PATH")) {
    KVTIER_ASSIGN_OR_RETURN(IoPath p, parse_io_path(path));
    env.io_path = p;
  }
  KVTIER_ASSIGN_OR_RETURN(env.capacity_bytes, env_size("KVTIER_CAPACITY_BYTES"));
  KVTIER_ASSIGN_OR_RETURN(env.segment_bytes, env_size("KVTIER_SEGMENT_BYTES"));
  KVTIER_ASSIGN_OR_RETURN(env.io_request_bytes, env_size("KVTIER_IO_REQUEST_BYTES"));
  KVTIER_ASSIGN_OR_RETURN(env.staging_bytes, env_size("KVTIER_STAGING_BYTES"));
  KVTIER_ASSIGN_OR_RETURN(env.dram_bytes, env_size("KVTIER_DRAM_BYTES"));
  return env;
}

}  // namespace kvtier
