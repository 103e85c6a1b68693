// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's in-memory index of live records.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/keys.hpp"
#include "store/record_format.hpp"

namespace kvtier {

/// @brief One job: which records the store holds. Key to record, a partial chunk's parent to its
/// keys, and the records on segments of drives missing at open: kept (checkpoints keep them), never
/// served, served again once the drive is back at a later open. What each segment holds is the
/// store's (its segment table); the durable copy of this index is the journal and checkpoint.
/// Not thread-safe: used under the store's lock.
class RecordIndex {
 public:
  explicit RecordIndex(uint32_t chunk_tokens = 0) : chunk_tokens_(chunk_tokens) {}

  /// The served record of `key`, or null.
  [[nodiscard]] const RecordMeta* find(const Key128& key) const;
  [[nodiscard]] bool contains(const Key128& key) const { return served_.contains(key); }
  /// Whether `key` is a record on a missing drive.
  [[nodiscard]] bool offline(const Key128& key) const { return offline_.contains(key); }
  /// Serves `meta`; a copy of its key on a missing drive is older and goes. The caller removes a
  /// served copy first.
  void add(const RecordMeta& meta);
  /// Stops serving `meta`.
  void remove(const RecordMeta& meta);
  /// Keeps `meta`, on a missing drive, unserved.
  void add_offline(const RecordMeta& meta) { offline_[meta.key] = meta; }
  /// Forgets the copy of `key` on a missing drive; false when there is none.
  bool erase_offline(const Key128& key) { return offline_.erase(key) > 0; }

  /// Served partial-chunk records whose parent is `parent`.
  [[nodiscard]] std::vector<RecordMeta> partial_children(const Key128& parent) const;
  [[nodiscard]] size_t served() const { return served_.size(); }
  [[nodiscard]] size_t offline_count() const { return offline_.size(); }
  /// Served and offline records together: what a checkpoint holds.
  [[nodiscard]] size_t all() const { return served_.size() + offline_.size(); }
  /// Every record, served and offline (for a checkpoint).
  [[nodiscard]] std::vector<RecordMeta> live() const;
  /// Every served record.
  [[nodiscard]] std::vector<RecordMeta> served_records() const;

 private:
  uint32_t chunk_tokens_;
  std::unordered_map<Key128, RecordMeta, Key128Hash> served_;
  std::unordered_map<Key128, std::vector<Key128>, Key128Hash> partials_;  // parent -> keys
  std::unordered_map<Key128, RecordMeta, Key128Hash> offline_;
};

}  // namespace kvtier
