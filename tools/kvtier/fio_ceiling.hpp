// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The drive's ceiling measured by an independent tool: fio replays the exact reads a restore makes
// (the same file ranges, split into requests of the same size) with O_DIRECT, one job per rank, all
// at once. kvtier's own raw read stays next to it as attribution, never as the ceiling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <kvtier/kvtier.hpp>

namespace kvtier::cli {

/// One fio run.
struct FioRead {
  uint64_t bytes = 0;   ///< What the replayed reads cover (every byte of every stream).
  double seconds = 0;   ///< The longest job's run time (first submission to last completion).
  unsigned depth = 0;   ///< Requests in flight per job.
  [[nodiscard]] double gbps() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }
};

/// @brief fio, found and run. Not thread-safe.
class FioCeiling {
 public:
  /// Finds `binary` ("fio": on PATH) and checks it runs; `work_dir` holds its job files and
  /// outputs. kNotFound with what to do when it is missing.
  [[nodiscard]] static Result<FioCeiling> find(const std::string& binary, const std::string& work_dir);

  [[nodiscard]] const std::string& version() const { return version_; }
  /// The I/O engine fio ran with (io_uring, else libaio, else psync: the first that works here).
  [[nodiscard]] const std::string& engine() const { return engine_; }
  /// The depth calibrate() chose (the fastest), or the one given to set_depth().
  [[nodiscard]] unsigned depth() const { return depth_; }
  void set_depth(unsigned depth) { depth_ = depth; }

  /// Reads `streams` (one fio job each, all at once: one per rank and drive), each its extents in order
  /// in requests of at most `request_bytes`, `depth` in flight per job, O_DIRECT.
  [[nodiscard]] Result<FioRead> read(const std::vector<std::vector<FileExtent>>& streams, uint64_t request_bytes,
                                     unsigned depth);
  /// read() at each of `depths`; the fastest becomes depth(). Every run is returned.
  [[nodiscard]] Result<std::vector<FioRead>> calibrate(const std::vector<std::vector<FileExtent>>& streams,
                                                       uint64_t request_bytes, const std::vector<unsigned>& depths);

  /// What the ceiling is, for a table's notes.
  [[nodiscard]] std::string describe() const;

 private:
  FioCeiling(std::string binary, std::string work_dir, std::string version)
      : binary_(std::move(binary)), work_dir_(std::move(work_dir)), version_(std::move(version)) {}
  [[nodiscard]] Result<FioRead> run(const std::vector<std::vector<FileExtent>>& streams, uint64_t request_bytes,
                                    unsigned depth, const std::string& engine);

  std::string binary_;
  std::string work_dir_;
  std::string version_;
  std::string engine_;
  unsigned depth_ = 8;
  unsigned runs_ = 0;
};

/// Parses fio's JSON output: the longest job's run time in seconds (the jobs run at once).
/// kInvalidArgument when it is not fio's JSON or reports an error.
[[nodiscard]] Result<double> parse_fio_runtime(const std::string& json);

/// `extents` split by the device their files are on (st_dev), order kept within each: one fio job
/// per drive, as a store over several drives reads them all at once.
std::vector<std::vector<FileExtent>> split_by_device(const std::vector<FileExtent>& extents);

/// fio's version 2 I/O log replaying `extents` in requests of at most `request_bytes`.
std::string fio_iolog(const std::vector<FileExtent>& extents, uint64_t request_bytes);

}  // namespace kvtier::cli
