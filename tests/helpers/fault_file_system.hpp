// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A FileSystem for tests that wraps the real one over a real directory and (1) fails chosen calls
// (EIO, ENOSPC, short and torn writes) and (2) simulates a power cut: it keeps what each file held
// at its last sync and which creations, renames and deletions no directory sync has made durable,
// and on recover() puts the directory back the way a crash would have left it.
//
// Writes the I/O engines make on a File's raw descriptor (File::fd()) bypass it: tests that crash
// write records through Store::write_bytes.
#pragma once

#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/file_system.hpp"

namespace kvtier::testing {

/// The kinds of calls a fault can be put on.
enum class FsOp {
  kOpen,  ///< FileSystem::open (with or without O_CREAT)
  kRead,
  kWrite,
  kSync,
  kTruncate,
  kAllocate,
  kStat,  ///< File::stat, FileSystem::stat, check_writable and free_bytes
  kLock,
  kRename,
  kRemove,
  kMakeDir,
  kListDir,
  kSyncDir,
};

/// One injected fault: the `nth` call (from 1) of kind `op` on a path containing `path_part`, and
/// the `times` - 1 such calls after it, fail with `error`.
struct FsFault {
  FsOp op = FsOp::kWrite;
  std::string path_part;  ///< Empty: any path.
  uint64_t nth = 1;
  uint64_t times = 1;  ///< UINT64_MAX: every call from the nth on.
  int error = EIO;
  /// kWrite only: bytes written before the error (a short write on a full disk, a torn write).
  uint64_t written = 0;
};

/// What a crash keeps of what was not made durable.
enum class CrashMode {
  kDropUnsynced,  ///< Every file back to its last synced content; every undurable name op undone.
  /// A random prefix of each file's unsynced writes survives (the last one possibly torn at a
  /// 512-byte sector), and a random prefix of the undurable name ops: what a disk that wrote
  /// back part of its cache may leave.
  kKeepSome,
};

/// @brief Thread-safe. Tracks only calls made through it: start it on a directory whose contents
/// are durable (empty, or just recovered).
class FaultFileSystem final : public FileSystem {
 public:
  explicit FaultFileSystem(uint64_t seed = 1);
  ~FaultFileSystem() override;

  void add_fault(FsFault fault);
  void clear_faults();
  /// The `n`th mutating call from now (write, sync, truncate, allocate, create, rename, remove,
  /// mkdir, directory sync) on a path containing `path_part` does not happen, and neither does any
  /// call after it: each fails with EIO, as if the machine lost power there. Under kKeepSome a
  /// write hit by it lands partly.
  void crash_after(uint64_t n, CrashMode mode = CrashMode::kDropUnsynced,
                   std::string path_part = {});
  /// Crashes now (every later call fails until recover()).
  void crash(CrashMode mode = CrashMode::kDropUnsynced);
  [[nodiscard]] bool crashed() const;
  /// Where the crash came: "<op> <path>" of the call it stopped, empty when crash() was called.
  [[nodiscard]] std::string crash_point() const;
  /// Mutating calls made so far (what crash_after counts).
  [[nodiscard]] uint64_t mutations() const;
  /// Puts the real directory in the state the crash left (call once everything using the files is
  /// closed), forgets all tracking and accepts calls again.
  void recover();

  Result<std::unique_ptr<File>> open(const std::string& path, int flags,
                                     mode_t mode = 0600) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status remove(const std::string& path) override;
  Status make_dir(const std::string& path) override;
  Result<std::vector<std::string>> list_dir(const std::string& dir) override;
  Result<FileInfo> stat(const std::string& path) override;
  Status sync_dir(const std::string& dir) override;
  Status check_writable(const std::string& path) override;
  Result<uint64_t> free_bytes(const std::string& dir) override;

  /// One file's contents as the fault file system tracks them (an inode).
  struct Node;

 private:
  friend class FaultFile;
  struct NameOp;

  /// Ok, or the error a fault or the crash puts on this call; counts the call. Caller holds mu_.
  Status check_locked(FsOp op, const std::string& path, FsFault* hit = nullptr);
  Status check_call_locked(FsOp op, const std::string& path, bool mutates, FsFault* hit = nullptr);
  std::shared_ptr<Node> node_locked(const std::string& path);
  /// Takes the node's durable content from the real file if it has none yet.
  void snapshot_locked(Node& node);
  void materialize_locked();

  std::shared_ptr<FileSystem> real_ = FileSystem::posix();
  mutable std::mutex mu_;
  std::mt19937_64 random_;
  std::vector<std::pair<FsFault, uint64_t>> faults_;    // with the matching calls seen so far
  std::map<std::string, std::shared_ptr<Node>> nodes_;  // by current path: files touched
  std::vector<NameOp> name_ops_;                        // not yet made durable, in order
  std::optional<uint64_t> crash_in_;  // mutating calls (on crash_part_) left before the crash
  std::string crash_part_;
  CrashMode mode_ = CrashMode::kDropUnsynced;
  bool crashed_ = false;
  std::string crash_point_;
  uint64_t mutations_ = 0;
};

}  // namespace kvtier::testing
