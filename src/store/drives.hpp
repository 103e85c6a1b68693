// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The drives of a store spread over several directories: which one holds the index, which belong
// to the store, and which are missing. Layout in docs/format.md ("Several drives").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/file_system.hpp"
#include "common/log.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// One drive of a store: its rank directory, or why it cannot be used now.
struct Drive {
  std::string dir;        ///< The rank directory on this drive; empty when not given at open.
  std::string id;         ///< From the drive's marker; empty in a one-directory store.
  bool available = true;  ///< Listed, reachable and this store's.
  std::string problem;    ///< Why it is not available.
  /// Why it takes no new segments while its records are still served: read-only at open, or a
  /// segment could not be made or written there since (gone, read-only, failing). Empty while it
  /// takes them. Lasts until the store reopens.
  std::string unwritable;
  /// What the store may take on this drive's file system, learned when it refused a new segment
  /// (ENOSPC) below the capacity; 0 while none has been refused. Lasts until the store reopens.
  uint64_t fs_limit = 0;
  /// A segment file was removed here since the directory was last synced: a checkpoint syncs it
  /// before it forgets the drop, so that no power cut brings the file back.
  bool unsynced_removal = false;

  /// Whether new segments may go here.
  [[nodiscard]] bool takes_new_segments() const { return available && unwritable.empty(); }
};

/// What the drives of a store are. drives[0] is the home: it holds the index and the lock.
struct DriveSet {
  std::vector<Drive> drives;
  std::string store_id;  ///< Empty for a one-directory store (no drive markers at all).
  /// Listed directories that could not be reached, and why: they may be members gone missing.
  std::vector<std::string> unreachable;

  [[nodiscard]] size_t offline() const;
};

constexpr const char* kDrivesName = "DRIVES.json";  // in the home: the store's id and its drives
constexpr const char* kDriveName = "DRIVE.json";    // in every other drive: whose drive it is

/// Which of `rank_dirs` holds the store's index (its MANIFEST.json). None: the first when
/// `create` (a new store), else kNotFound. kInvalidArgument when two hold one (two stores), or when
/// none does but a listed directory is another drive of a store (its home is not in the list).
[[nodiscard]] Result<size_t> find_home(FileSystem& fs, std::span<const std::string> rank_dirs,
                                       bool create);

/// Reads the home's drive list and the markers of `others` (rank directories), adding directories
/// that hold nothing yet as new drives (markers written before the list names them) unless
/// `read_only`. A listed directory that is another store's, or that holds segment files without a
/// marker, is refused (kInvalidArgument, kCorrupt); one that cannot be reached is left out and
/// noted; a member drive not among those reached is kept, unavailable, with the reason.
[[nodiscard]] Result<DriveSet> open_drives(FileSystem& fs, uint32_t dir_depth,
                                           const std::string& home,
                                           std::span<const std::string> others, bool read_only,
                                           const Logger& log);

}  // namespace kvtier
