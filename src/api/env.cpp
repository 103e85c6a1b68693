// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "api/env.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier {
namespace {

Result<std::optional<uint64_t>> env_size(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::optional<uint64_t>();
  auto parsed = parse_size(value);
  if (!parsed) return fail(parsed.error().with_context(name));
  return std::optional<uint64_t>(*parsed);
}

/// A whole number from 1 to `most`.
Result<std::optional<uint32_t>> env_count(const char* name, uint32_t most) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::optional<uint32_t>();
  uint32_t n = 0;
  const char* end = value + std::strlen(value);
  const auto [at, ec] = std::from_chars(value, end, n);
  if (ec != std::errc() || at != end || n == 0 || n > most) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("{}={}: expected a whole number from 1 to {}", name, value, most));
  }
  return std::optional<uint32_t>(n);
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
  KVTIER_ASSIGN_OR_RETURN(env.coded_run_bytes, env_size("KVTIER_CODED_RUN_BYTES"));
  if (env.coded_run_bytes && *env.coded_run_bytes == 0) {
    return fail(ErrorCode::kInvalidArgument,
                "KVTIER_CODED_RUN_BYTES=0: a run must hold at least one record (say a size)");
  }
  KVTIER_ASSIGN_OR_RETURN(env.consumer_threads, env_count("KVTIER_CONSUMER_THREADS", 256));
  return env;
}

}  // namespace kvtier
