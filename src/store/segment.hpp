// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Segment files: large preallocated files that records are appended to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/file_system.hpp"
#include "kvtier/geometry.hpp"
#include "store/record_format.hpp"

namespace kvtier {

/// @brief An open segment file. Shared by the store and in-flight reads: a segment evicted while a
/// restore reads it is unlinked, and its fd stays valid until the last reader lets go.
/// Immutable after creation; thread-safe.
struct SegmentFile {
  uint32_t id = 0;
  std::string path;
  std::unique_ptr<File>
      file;  ///< Opened through the store's FileSystem; every store access uses it.
  /// file's descriptor, for the I/O engines that submit on it themselves (File::fd() says why).
  RawFd fd;
  uint64_t size = 0;
  bool direct = false;  ///< Opened with O_DIRECT.
  uint32_t drive = 0;   ///< Which of the store's drives holds it (0 in a one-directory store).
};

std::string segment_name(uint32_t id);

/// Creates segment `id` in `dir`, preallocated to `size` bytes (fallocate), and syncs `dir` so that
/// the file outlives a crash. ENOSPC is kNoSpace.
[[nodiscard]] Result<std::shared_ptr<SegmentFile>> create_segment(FileSystem& fs,
                                                                  const std::string& dir,
                                                                  uint32_t id, uint64_t size,
                                                                  bool direct);
/// What a segment of `size` bytes is expected to take on disk (st_blocks), file-system blocks of
/// its own included; the store measures each segment it makes and raises the estimate when short.
uint64_t expected_disk_bytes(uint64_t size);
/// Opens an existing segment (for reading only when `read_only`).
[[nodiscard]] Result<std::shared_ptr<SegmentFile>> open_segment(FileSystem& fs,
                                                                const std::string& dir, uint32_t id,
                                                                bool direct,
                                                                bool read_only = false);
/// Ids of the segment files in `dir`, ascending.
[[nodiscard]] Result<std::vector<uint32_t>> list_segments(const std::string& dir,
                                                          FileSystem& fs = *FileSystem::posix());

/// Recovers a segment's records by walking its headers from offset 0 up to the first block that
/// is not a valid header of `geometry`. Payloads are not read (restores verify them).
[[nodiscard]] Result<std::vector<RecordMeta>> scan_segment(const SegmentFile& segment,
                                                           const RecordShape& shape);

/// Whether the filesystem holding `dir` takes O_DIRECT writes and reads of 4 KiB. When it does not,
/// `reason` says why (e.g. "O_DIRECT refused by the filesystem (EINVAL)").
bool probe_direct_io(FileSystem& fs, const std::string& dir, std::string& reason);
/// The same for a store that may not be written: an O_DIRECT read of the first block of its first
/// segment, writing nothing.
bool probe_direct_read(FileSystem& fs, const std::string& dir, std::string& reason);

}  // namespace kvtier
