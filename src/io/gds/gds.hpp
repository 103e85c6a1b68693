// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// GPUDirect Storage through cuFile, loaded at run time. No cuFile type appears here: the rest of
// kvtier builds and runs without cufile.h or libcufile.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "io/pipeline.hpp"
#include "kvtier/status.hpp"

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
  /// What cuFile needs of the GPU it serves, from the CUDA layer (this layer makes no CUDA calls).
  struct Gpu {
    std::function<Status()> make_current;  ///< makes the GPU current on the calling thread
    /// Device memory on the GPU, freed there by its last owner.
    std::function<Result<std::shared_ptr<std::byte>>(size_t bytes)> allocate;
  };

  /// Loads libcufile.so.0, opens the driver and registers `buffers` device buffers of
  /// `buffer_bytes` allocated on `gpu`. kNotSupported with cuFile's own words when a cuFile step
  /// fails; the GPU's error when it cannot be made current or allocate.
  [[nodiscard]] static Result<std::unique_ptr<GdsContext>> create(Gpu gpu, size_t buffers,
                                                                  size_t buffer_bytes);
  ~GdsContext();

  [[nodiscard]] const GdsMode& mode() const;
  /// The registered device buffers (device memory: never dereference on the host). An operation
  /// leases its share, and hands buffers back while others wait (run_on_threads).
  [[nodiscard]] StagingPool& buffers();

  /// Registers the file open as `fd` (`path`, for messages) with cuFile on first use, kept until
  /// the context closes or only the context still holds `keep_open` (the file's owner, holding it
  /// open: a file its owner let go of is deregistered at the next attach). kNotSupported with
  /// cuFile's reason when it refuses (e.g. 5027 where udev knows nothing of the block device).
  [[nodiscard]] Status attach(int fd, const std::string& path,
                              std::shared_ptr<const void> keep_open);
  /// Reads [offset, offset + bytes) of the attached file `fd` into `buffer` (one of buffers()'
  /// slots), looping over short reads.
  [[nodiscard]] Status read(int fd, std::byte* buffer, uint64_t offset, size_t bytes);
  /// Writes the first `bytes` of `buffer` (one of buffers()' slots) to [offset, offset + bytes) of
  /// the attached file `fd`.
  [[nodiscard]] Status write(int fd, std::byte* buffer, uint64_t offset, size_t bytes);
  /// How cuFile itself says it served this process's reads and writes, from its statistics API
  /// (level 3, per GPU: peer-to-peer, nvidia-fs and POSIX operation counts); empty where this
  /// libcufile has no statistics API.
  [[nodiscard]] std::string io_counts() const;

  class Impl;

 private:
  explicit GdsContext(std::unique_ptr<Impl> impl);
  Status transfer(int fd, std::byte* buffer, uint64_t offset, size_t bytes, bool write);
  std::unique_ptr<Impl> impl_;
};

/// Whether this build can load cuFile at all (it was compiled against cufile.h).
bool gds_compiled_in();

}  // namespace kvtier
