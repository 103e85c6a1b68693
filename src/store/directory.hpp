// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's home directory: its lock and its manifest. Layout in docs/format.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/file_system.hpp"
#include "common/log.hpp"
#include "kvtier/geometry.hpp"

namespace kvtier {

/// What MANIFEST.json holds. A manifest written before stores kept their capacity has none.
struct Manifest {
  KvGeometry geometry;
  uint32_t format_version =
      1;  ///< of the store and its records: 1 (a TP rank's), 2 (a head group's)
  uint64_t segment_bytes = 0;
  std::optional<uint64_t> capacity_bytes;
};

/// Whether `err` says the store may not be written here (read-only media, another user's store).
inline bool write_refused(int err) { return err == EROFS || err == EACCES || err == EPERM; }

/// @brief One job: the home directory's lock and manifest. A writer holds LOCK exclusively; where
/// the directory or its index files may not be written (EROFS, EACCES) the store is read-only under
/// a shared lock, so that writers and readers exclude each other; an open asked to be read-only
/// takes no lock at all (it reads a snapshot beside a writer). Not thread-safe: the store uses it
/// at open and under its own lock.
class StoreDirectory {
 public:
  static constexpr const char* kManifestName = "MANIFEST.json";
  static constexpr const char* kLockName = "LOCK";

  StoreDirectory() = default;
  /// Locks `dir` (an existing directory), or with `read_only` only notes that nothing is written.
  /// kLocked, saying who holds it, when another engine writes it (or reads it, for a writer).
  [[nodiscard]] static Result<StoreDirectory> open(FileSystem& fs, std::string dir, bool read_only,
                                                   const Logger& log);

  [[nodiscard]] bool read_only() const { return read_only_; }
  [[nodiscard]] const std::string& read_only_reason() const { return read_only_reason_; }
  /// kPermission naming why the store is read-only.
  [[nodiscard]] Status refuse_read_only() const;

  /// The manifest, or none where there is none yet (a new store).
  [[nodiscard]] Result<std::optional<Manifest>> read_manifest() const;
  /// Replaces the manifest atomically.
  [[nodiscard]] Status write_manifest(const Manifest& manifest) const;
  /// Removes temporary files a crash left: they would only take room the capacity does not count.
  void remove_stale_files() const;

 private:
  /// Takes LOCK: exclusively where the store may be written, else shared (read-only).
  [[nodiscard]] Status lock();
  /// Why the store may not be written here (empty when it may): its directory or index files.
  [[nodiscard]] std::string write_problem() const;
  [[nodiscard]] Status lock_exclusive(const std::string& path);
  [[nodiscard]] Status lock_shared(const std::string& path, std::string reason);

  FileSystem* fs_ = nullptr;
  const Logger* log_ = nullptr;
  std::string dir_;
  std::unique_ptr<File> lock_file_;
  bool read_only_ = false;
  std::string read_only_reason_;
};

}  // namespace kvtier
