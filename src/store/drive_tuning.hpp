// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// How one drive of a store is best read, as its read probe found: kept on the drive, in the
// directory above the stores its ranks read (engine/tuning.cpp), so that it travels with the drive
// and outlives the process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/file_system.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

constexpr const char* kTuningName = "TUNING.json";

struct DriveTuning {
  uint64_t request_bytes = 0;   ///< read requests of this size...
  uint32_t in_flight = 0;       ///< ...this many at once, per reader
  double bytes_per_second = 0;  ///< what the probe measured for that pattern
  std::string probed_file;      ///< the segment file read, for the record
  std::string probed_at;        ///< UTC, ISO 8601
  /// A drive never tuned whose probe failed: why (the pattern fields are then 0), and when, in
  /// seconds since the epoch, so that opens do not probe it again at once.
  std::string failed;
  int64_t failed_at = 0;

  friend bool operator==(const DriveTuning&, const DriveTuning&) = default;
};

/// The tuning kept in `dir`; nullopt when there is none. A file that is not a tuning (garbled,
/// sizes not multiples of 4 KiB, zero; a failure record without its reason and time) is kCorrupt:
/// the caller treats the drive as untuned.
[[nodiscard]] Result<std::optional<DriveTuning>> read_drive_tuning(FileSystem& fs,
                                                                   const std::string& dir);
/// Replaces the tuning in `dir` atomically (write_file_atomic).
[[nodiscard]] Status write_drive_tuning(FileSystem& fs, const std::string& dir,
                                        const DriveTuning& tuning);

}  // namespace kvtier
