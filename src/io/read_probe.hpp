// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Finding a drive's best read pattern by trying them: request size times requests in flight, the
// sweep fio users run by hand, done on the drive's own files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvtier/options.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// How a drive is read: requests of `request_bytes`, `in_flight` of them at once (so
/// request_bytes * in_flight bytes of staging per drive).
struct ReadPattern {
  uint32_t request_bytes = 0;
  uint32_t in_flight = 0;
  [[nodiscard]] uint64_t staging_bytes() const {
    return uint64_t{request_bytes} * uint64_t{in_flight};
  }
  friend bool operator==(const ReadPattern&, const ReadPattern&) = default;
};

struct PatternRate {
  ReadPattern pattern;
  double bytes_per_second = 0;
};

struct ProbeConfig {
  /// Request sizes and depths tried: every pair whose staging fits max_staging_bytes.
  std::vector<uint32_t> request_sizes{1u << 20, 2u << 20, 4u << 20, 8u << 20, 16u << 20};
  std::vector<uint32_t> in_flight{1, 2, 4, 8, 16, 32};
  uint64_t max_staging_bytes = uint64_t{256} << 20;
  /// Bytes each trial reads (at least four rounds of its staging, so a deep pattern is measured
  /// past its ramp-up); the file is read round and round when it is smaller.
  uint64_t bytes_per_trial = uint64_t{128} << 20;
  /// The best few of the sweep are measured again and ranked by the mean of both runs, so one
  /// lucky trial on a noisy drive does not decide; 0 ranks every trial by its one run.
  size_t confirm = 3;
  /// Patterns within this fraction of the best rate count as equal: the one with the least staging
  /// (then the fewest requests in flight) is chosen, as it leaves memory and queue to others.
  double tie = 0.03;
  IoPath path = IoPath::kDirect;
};

struct ProbeReport {
  ReadPattern best;
  std::vector<PatternRate> rates;  ///< every trial, in the order run (confirmations last)
  std::string fallback;            ///< why the requested I/O path was not used, if it was not
};

/// Reads [0, file_bytes) of `fd` (opened for `config.path`: O_DIRECT for kDirect) in every pattern
/// of the sweep and returns the fastest. The file must hold written data: unwritten extents read
/// as zeros without touching the drive. Fails with the first I/O error; the caller keeps its
/// defaults then.
[[nodiscard]] Result<ProbeReport> probe_read_patterns(int fd, uint64_t file_bytes,
                                                      const ProbeConfig& config = {});

}  // namespace kvtier
