// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The only place KVTIER_* environment variables are read.
#pragma once

#include <cstdint>
#include <optional>

#include "kvtier/options.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// Values set in the environment; a variable that is set but malformed is an error.
struct EnvOverrides {
  std::optional<LogLevel> log_level;         // KVTIER_LOG_LEVEL=debug|info|warn|error|off
  std::optional<IoPath> io_path;             // KVTIER_IO_PATH=auto|direct|buffered
  std::optional<uint64_t> capacity_bytes;    // KVTIER_CAPACITY_BYTES (accepts K/M/G/T suffixes)
  std::optional<uint64_t> segment_bytes;     // KVTIER_SEGMENT_BYTES
  std::optional<uint64_t> io_request_bytes;  // KVTIER_IO_REQUEST_BYTES
  std::optional<uint64_t> staging_bytes;     // KVTIER_STAGING_BYTES
  std::optional<uint64_t> dram_bytes;        // KVTIER_DRAM_BYTES
  std::optional<uint64_t> coded_run_bytes;   // KVTIER_CODED_RUN_BYTES
  std::optional<uint32_t> consumer_threads;  // KVTIER_CONSUMER_THREADS (1-256)
};

[[nodiscard]] Result<EnvOverrides> read_env_overrides();

}  // namespace kvtier
