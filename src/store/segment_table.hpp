// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's table of its segment files: contents, disk use, recency and pins.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/keys.hpp"
#include "store/index_log.hpp"
#include "store/segment.hpp"

namespace kvtier {

/// What the store knows of one of its segment files.
struct SegmentState {
  std::shared_ptr<SegmentFile> file;
  uint64_t write_offset = 0;
  uint64_t live_bytes = 0;
  uint64_t records = 0;
  uint64_t tokens = 0;
  uint64_t disk_bytes = 0;  ///< What the file takes on disk (st_blocks), measured.
  uint64_t last_use = 0;    ///< On the sequence clock; a write is a use.
  uint64_t saved_use = 0;   ///< The last use the index holds durably.
  uint32_t pins = 0;        ///< Reservations writing into it: not evictable while any.
  uint32_t drive = 0;       ///< Index into the store's drives.
  /// Every key indexed here, so evicting the segment need not scan the whole index; a key dropped
  /// or stored again elsewhere since stays listed, and the index says whether it is still here.
  std::vector<Key128> keys;
};

/// @brief One job: the store's segments, each with what it holds, what it takes on disk, when it
/// was last used and whether a writer has it pinned; and the eviction order over them (least
/// recently used first, pinned ones never). Not thread-safe: used under the store's lock.
class SegmentTable {
 public:
  using Map = std::unordered_map<uint32_t, SegmentState>;

  [[nodiscard]] SegmentState& at(uint32_t id) { return segments_.at(id); }
  [[nodiscard]] const SegmentState& at(uint32_t id) const { return segments_.at(id); }
  SegmentState& operator[](uint32_t id) { return segments_[id]; }
  [[nodiscard]] Map::iterator find(uint32_t id) { return segments_.find(id); }
  [[nodiscard]] bool contains(uint32_t id) const { return segments_.contains(id); }
  Map::iterator erase(Map::iterator it) { return segments_.erase(it); }
  void erase(uint32_t id) { segments_.erase(id); }
  [[nodiscard]] Map::iterator begin() { return segments_.begin(); }
  [[nodiscard]] Map::iterator end() { return segments_.end(); }
  [[nodiscard]] Map::const_iterator begin() const { return segments_.begin(); }
  [[nodiscard]] Map::const_iterator end() const { return segments_.end(); }
  [[nodiscard]] size_t size() const { return segments_.size(); }

  /// The least recently used segment not pinned among those `eligible` allows; null if none.
  [[nodiscard]] const SegmentState* least_recently_used(
      const std::function<bool(const SegmentState&)>& eligible) const;
  /// What the segments on `drive` take on disk.
  [[nodiscard]] uint64_t disk_bytes_on(uint32_t drive) const;
  /// What the unpinned segments on `drive` take on disk: what evicting all of them frees.
  [[nodiscard]] uint64_t evictable_bytes_on(uint32_t drive) const;
  [[nodiscard]] uint64_t live_bytes() const;
  /// Each segment's last use, for a checkpoint.
  [[nodiscard]] std::vector<SegmentUse> uses() const;
  /// Journal entries for the uses the index does not hold yet.
  [[nodiscard]] std::vector<JournalEntry> unsaved_uses() const;
  /// Every use is now durable.
  void uses_saved();

 private:
  Map segments_;
};

}  // namespace kvtier
