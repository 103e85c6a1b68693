// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The errno error domain, file-descriptor ownership and full-length POSIX I/O.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvtier/status.hpp"

namespace kvtier {

/// Maps an errno to a Status: ENOSPC -> kNoSpace, EACCES/EPERM/EROFS -> kPermission,
/// ENOENT -> kNotFound, the rest -> kIo.
Status posix_error(int err, std::string_view context);

/// @brief Sole owner of a file descriptor; -1 is the only invalid value. Not thread-safe.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int fd_ = -1;
};

/// open(2) wrapped: the fd is owned before anything else can fail. A file this call creates
/// (O_CREAT) gets exactly `mode`, whatever the umask; an existing file keeps its mode.
[[nodiscard]] Result<UniqueFd> open_file(const std::string& path, int flags, mode_t mode = 0600);

/// Reads exactly buf.size() bytes at offset, retrying on EINTR and short reads.
/// A read past end of file is kCorrupt ("short read").
[[nodiscard]] Status pread_full(int fd, std::span<std::byte> buf, uint64_t offset);
/// Writes exactly buf.size() bytes at offset, retrying on EINTR and short writes.
[[nodiscard]] Status pwrite_full(int fd, std::span<const std::byte> buf, uint64_t offset);
/// fsync of a directory, so renames and creations in it are durable.
[[nodiscard]] Status fsync_dir(const std::string& dir);
/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync of the directory). The
/// file is created 0600.
[[nodiscard]] Status write_file_atomic(const std::string& dir, const std::string& name,
                                       std::span<const std::byte> bytes);
/// Bytes the file system has allocated to `fd` (st_blocks x 512: what du counts).
[[nodiscard]] Result<uint64_t> allocated_bytes(int fd);
/// Raises this process's soft limit on open files (RLIMIT_NOFILE) to `wanted`, or to the hard
/// limit where that is lower; never lowers it. Returns the soft limit in force afterwards.
uint64_t raise_open_file_limit(uint64_t wanted);
/// Whole file into memory.
[[nodiscard]] Result<std::string> read_file(const std::string& path);

}  // namespace kvtier
