// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The file-system seam: every file operation of the store goes through a FileSystem, so tests can
// put one that injects faults or simulates a crash (tests/helpers/fault_file_system.hpp) under it.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier {

/// What stat says of a file or directory.
struct FileInfo {
  bool directory = false;
  uint64_t size = 0;
  uint64_t allocated = 0;  ///< Bytes the file system gave it (st_blocks x 512: what du counts).
  uint64_t links = 0;      ///< Hard links; 0 once an open file has been deleted.
  uint64_t device = 0;
  uint64_t inode = 0;
  timespec mtime{};
};

enum class LockMode { kShared, kExclusive };

/// @brief A borrowed file descriptor: what an I/O engine submits requests on. The File it was taken
/// from owns it; -1 when there is none.
class RawFd {
 public:
  RawFd() = default;
  explicit RawFd(int fd) : fd_(fd) {}
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_ = -1;
};

/// @brief One open file. Reads and writes are whole (short transfers and EINTR are retried) and
/// positional, so one File may be used by several threads at once; the other calls are not meant to
/// race with writes. Errors keep their errno (Status::native_error).
class File {
 public:
  virtual ~File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  /// The descriptor, for the I/O engines (io_uring, cuFile) that submit requests on it themselves:
  /// batched asynchronous I/O cannot go through a call per operation. What they write is made
  /// durable through sync() of this File, so a fault-injecting FileSystem still decides that.
  [[nodiscard]] virtual int fd() const = 0;
  /// Reads buf.size() bytes at `offset`, fewer only where the file ends; returns how many.
  [[nodiscard]] virtual Result<size_t> read(std::span<std::byte> buf, uint64_t offset) = 0;
  /// Reads exactly buf.size() bytes at `offset`; past the end of the file is kCorrupt.
  [[nodiscard]] Status read_at(std::span<std::byte> buf, uint64_t offset);
  /// Writes exactly buf.size() bytes at `offset`.
  [[nodiscard]] virtual Status write_at(std::span<const std::byte> buf, uint64_t offset) = 0;
  /// Makes the file's data durable (fdatasync).
  [[nodiscard]] virtual Status sync() = 0;
  [[nodiscard]] virtual Status truncate(uint64_t size) = 0;
  /// Allocates blocks for the first `size` bytes (posix_fallocate): ENOSPC now, not at a write.
  [[nodiscard]] virtual Status allocate(uint64_t size) = 0;
  [[nodiscard]] virtual Result<FileInfo> stat() = 0;
  /// An advisory whole-file lock (flock), not waiting: EWOULDBLOCK (native_error) when it is held.
  [[nodiscard]] virtual Status try_lock(LockMode mode) = 0;
  virtual void unlock() = 0;

 protected:
  explicit File(std::string path) : path_(std::move(path)) {}

 private:
  std::string path_;
};

/// @brief The file operations the store makes. Implementations are thread-safe. Every call maps
/// errno to a Status the way posix_error does, and keeps the errno.
class FileSystem {
 public:
  virtual ~FileSystem() = default;

  /// The real file system (POSIX calls). Lives as long as the process.
  static const std::shared_ptr<FileSystem>& posix();

  /// open(2) `flags` (O_RDONLY/O_WRONLY/O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_DIRECT, O_DIRECTORY).
  /// A file this call creates gets exactly `mode`, whatever the umask; an existing one keeps its.
  [[nodiscard]] virtual Result<std::unique_ptr<File>> open(const std::string& path, int flags,
                                                           mode_t mode = 0600) = 0;
  /// rename(2): replaces `to` atomically. Durable once the directory is synced.
  [[nodiscard]] virtual Status rename(const std::string& from, const std::string& to) = 0;
  /// unlink(2). Durable once the directory is synced.
  [[nodiscard]] virtual Status remove(const std::string& path) = 0;
  /// mkdir(2) with mode 0700 whatever the umask; EEXIST (native_error) when `path` exists.
  [[nodiscard]] virtual Status make_dir(const std::string& path) = 0;
  /// Names in `dir` (no "." or "..").
  [[nodiscard]] virtual Result<std::vector<std::string>> list_dir(const std::string& dir) = 0;
  /// stat(2), following symlinks.
  [[nodiscard]] virtual Result<FileInfo> stat(const std::string& path) = 0;
  /// fsync of a directory: the creations, renames and deletions in it become durable.
  [[nodiscard]] virtual Status sync_dir(const std::string& dir) = 0;
  /// Whether this process may write `path` (its effective ids, as open() checks them): ok, or the
  /// errno that says why not.
  [[nodiscard]] virtual Status check_writable(const std::string& path) = 0;
  /// Bytes an unprivileged writer may still allocate on the file system holding `dir`.
  [[nodiscard]] virtual Result<uint64_t> free_bytes(const std::string& dir) = 0;

 protected:
  FileSystem() = default;
};

/// Whole file into memory.
[[nodiscard]] Result<std::string> read_file(FileSystem& fs, const std::string& path);
/// Writes `bytes` to `dir`/`name` atomically: a temporary file (`name`.tmp, or `tmp_name` where
/// several processes may write `name` at once), synced, renamed over it, and the directory
/// synced. The file is created 0600.
[[nodiscard]] Status write_file_atomic(FileSystem& fs, const std::string& dir,
                                       const std::string& name, std::span<const std::byte> bytes,
                                       const std::string& tmp_name = "");
/// Whether `path` exists: false on ENOENT, the error on anything else (EACCES, EIO).
[[nodiscard]] Result<bool> exists(FileSystem& fs, const std::string& path);
/// Makes directory `path` (0700) and syncs its parent so that it lasts; ok when it exists as a
/// directory, kInvalidArgument when it exists as something else.
[[nodiscard]] Status make_dir_durable(FileSystem& fs, const std::string& path);
/// make_dir_durable() of `path` and of its `parents` nearest ancestors, outermost first (a store's
/// directory and those between it and its root).
[[nodiscard]] Status make_dirs_durable(FileSystem& fs, const std::string& path, uint32_t parents);

}  // namespace kvtier
