// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// GPUDirect Storage through cuFile, loaded at run time. No cuFile type appears here: the rest of
// kvtier builds and runs without cufile.h or libcufile.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "io/pipeline.hpp"
#include "kvtier/status.hpp"
#include "store/segment.hpp"

namespace kvtier {

/// What cuFile said about this machine when it opened.
struct GdsMode {
  bool peer_to_peer = false;  ///< true only when the driver reports a P2P-capable storage target
  std::string
      description;  ///< "cuFile compat mode (...)" or "GPUDirect Storage peer-to-peer (...)"
};

/// @brief cuFile driver, file handles (one per segment, registered once) and registered device
/// staging buffers (registered once), shared by concurrent operations through a fair pool like the
/// host staging's. Thread-safe: handles are looked up under a lock; I/O on different buffers runs
/// in parallel.
class GdsContext {
 public:
  /// Loads libcufile.so.0, opens the driver and registers `buffers` device buffers of
  /// `buffer_bytes` on CUDA device `device`. kNotSupported with cuFile's own words when any step
  /// fails.
  [[nodiscard]] static Result<std::unique_ptr<GdsContext>> create(int device, size_t buffers,
                                                                  size_t buffer_bytes);
  ~GdsContext();

  [[nodiscard]] const GdsMode& mode() const;
  /// The registered device buffers (device memory: never dereference on the host). An operation
  /// leases its share, and hands buffers back while others wait (run_on_threads).
  [[nodiscard]] StagingPool& buffers();

  /// Registers `file` with cuFile on first use (kept until the context closes); kNotSupported with
  /// cuFile's reason when it refuses (e.g. 5027 where udev knows nothing of the block device).
  [[nodiscard]] Status attach(const std::shared_ptr<SegmentFile>& file);
  /// Reads [offset, offset + bytes) of an attached file into `buffer` (one of buffers()' slots),
  /// looping over short reads.
  [[nodiscard]] Status read(const SegmentFile& file, std::byte* buffer, uint64_t offset,
                            size_t bytes);
  /// Writes the first `bytes` of `buffer` (one of buffers()' slots) to [offset, offset + bytes) of
  /// an attached file.
  [[nodiscard]] Status write(const SegmentFile& file, std::byte* buffer, uint64_t offset,
                             size_t bytes);
  /// How cuFile itself says it served this process's reads and writes, from its statistics API
  /// (level 3, per GPU: peer-to-peer, nvidia-fs and POSIX operation counts); empty where this
  /// libcufile has no statistics API.
  [[nodiscard]] std::string io_counts() const;

  class Impl;

 private:
  explicit GdsContext(std::unique_ptr<Impl> impl);
  Status transfer(const SegmentFile& file, std::byte* buffer, uint64_t offset, size_t bytes,
                  bool write);
  std::unique_ptr<Impl> impl_;
};

/// Whether this build can load cuFile at all (it was compiled against cufile.h).
bool gds_compiled_in();

}  // namespace kvtier
