// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The drive's ceiling measured by an independent tool: fio reads exactly the file ranges a restore
// reads, in requests of the same size, with O_DIRECT, one stream per rank and drive, all at once.
// kvtier's own raw read stays next to it as attribution, never as the ceiling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <kvtier/kvtier.hpp>

namespace kvtier::cli {

/// One fio run.
struct FioRead {
  uint64_t bytes = 0;  ///< What the streams cover (every byte is read: parse_fio_report checks).
  double seconds = 0;  ///< The slowest stream's time on fio's clock (parse_fio_report()).
  unsigned depth = 0;  ///< Requests in flight per stream.
  /// fio's own user + system core-seconds over its jobs (usr_cpu and sys_cpu of job_runtime): what
  /// reading these ranges costs a reader, on this device, before any work of kvtier's.
  double cpu_seconds = 0;
  [[nodiscard]] double gbps() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  }
};

/// @brief fio, found and run. Not thread-safe.
class FioCeiling {
 public:
  /// Finds `binary` ("fio": on PATH) and checks it runs; `work_dir` holds its job files and
  /// outputs. kNotFound with what to do when it is missing.
  [[nodiscard]] static Result<FioCeiling> find(const std::string& binary,
                                               const std::string& work_dir);

  [[nodiscard]] const std::string& version() const { return version_; }
  /// The I/O engine fio ran with (io_uring, else libaio, else psync: the first that works here).
  [[nodiscard]] const std::string& engine() const { return engine_; }
  /// The depth calibrate() chose (the fastest), or the one given to set_depth().
  [[nodiscard]] unsigned depth() const { return depth_; }
  void set_depth(unsigned depth) { depth_ = depth; }

  /// Reads `streams` (one per rank and drive, all at once), each its extents in order in requests
  /// of at most `request_bytes`, `depth` in flight per stream, O_DIRECT (fio_job_file()).
  [[nodiscard]] Result<FioRead> read(const std::vector<std::vector<FileExtent>>& streams,
                                     uint64_t request_bytes, unsigned depth);
  /// read() at each of `depths` (in an order that does not always warm the deeper ones for the
  /// next); the fastest becomes depth(). Every run that could be timed is returned; an error only
  /// when none could.
  [[nodiscard]] Result<std::vector<FioRead>> calibrate(
      const std::vector<std::vector<FileExtent>>& streams, uint64_t request_bytes,
      const std::vector<unsigned>& depths);

  /// What the ceiling is, for a table's notes.
  [[nodiscard]] std::string describe() const;

 private:
  FioCeiling(std::string binary, std::string work_dir, std::string version)
      : binary_(std::move(binary)), work_dir_(std::move(work_dir)), version_(std::move(version)) {}
  [[nodiscard]] Result<FioRead> run(const std::vector<std::vector<FileExtent>>& streams,
                                    uint64_t request_bytes, unsigned depth,
                                    const std::string& engine);

  std::string binary_;
  std::string work_dir_;
  std::string version_;
  std::string engine_;
  unsigned depth_ = 8;
  unsigned runs_ = 0;
};

/// `extents` split by the device their files are on (st_dev), order kept within each: one fio
/// stream per drive, as a store over several drives reads them all at once.
std::vector<std::vector<FileExtent>> split_by_device(const std::vector<FileExtent>& extents);

/// One job of a fio run: one extent's whole requests, or its tail shorter than a request.
struct FioJob {
  std::string name;
  size_t stream = 0;
  uint64_t bytes = 0;
};

/// fio's job file reading `streams` all at once. Within a stream each extent is one job (its tail
/// shorter than a request another) that starts when the stream's previous job is done
/// (`wait_for`), so a stream reads its extents in order with `depth` requests in flight, as one
/// reader does. `jobs` receives every job. (Not a replayed I/O log: fio 3.33 ends a replay without
/// waiting for the requests still in flight, which makes any depth above 1 look faster than it is.)
/// kInvalidArgument for a path fio's job files cannot name (a line break in it).
[[nodiscard]] Result<std::string> fio_job_file(const std::vector<std::vector<FileExtent>>& streams,
                                               uint64_t request_bytes, unsigned depth,
                                               const std::string& engine,
                                               std::vector<FioJob>& jobs);

/// Reads fio's JSON report of `jobs`: every job must have read exactly its bytes (else kIo); a
/// stream's time is the sum of its jobs' job_runtime (fio's clock, its start-up and the gaps
/// between chained jobs left out: the ceiling errs fast, never slow); returns the slowest stream's
/// seconds and the jobs' CPU time (bytes and depth are the caller's).
[[nodiscard]] Result<FioRead> parse_fio_report(const std::string& json,
                                               const std::vector<FioJob>& jobs);

}  // namespace kvtier::cli
