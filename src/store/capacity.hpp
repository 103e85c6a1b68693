// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What a store may write: the capacity split between segments and the files beside them.
// docs/format.md ("Capacity").
#pragma once

#include <cstdint>
#include <string>

#include "kvtier/status.hpp"

namespace kvtier {

/// @brief One job: the store's byte budget. Holds the capacity and the segment size, what the files
/// beside the segments may take (lock, manifest, directory, the journal's budget, a checkpoint and
/// the one replacing it) and what a new segment is expected to take on disk. Arithmetic only: the
/// store asks it what fits and decides what to evict. Not thread-safe: used under the store's lock.
class CapacityBudget {
 public:
  /// Takes `capacity` and `segment_bytes` for the rank directory `dir`, which takes `dir_bytes` on
  /// disk now, with a journal of `journal_bytes`. kInvalidArgument, changing nothing, when that
  /// capacity cannot hold one segment and the index files.
  [[nodiscard]] Status resize(uint64_t capacity, uint64_t segment_bytes, uint64_t dir_bytes,
                              uint64_t journal_bytes, const std::string& dir);

  [[nodiscard]] uint64_t capacity() const { return capacity_; }
  [[nodiscard]] uint64_t segment_bytes() const { return segment_bytes_; }
  /// What a segment not yet made will take on disk.
  [[nodiscard]] uint64_t segment_estimate() const { return segment_estimate_; }
  /// A segment took `disk_bytes`: new ones are expected to take as much. True when that is more
  /// than expected so far.
  bool note_segment(uint64_t disk_bytes);
  void set_checkpoint_bytes(uint64_t disk_bytes) { checkpoint_disk_ = disk_bytes; }
  /// The least budget the journal gets.
  [[nodiscard]] uint64_t journal_floor() const { return journal_floor_; }
  /// How long the journal may grow before it is compacted: as long as the checkpoint of `records`
  /// in `segments` it is compacted into, so each entry costs O(1) checkpoint bytes.
  [[nodiscard]] uint64_t journal_budget(uint64_t records, uint64_t segments) const;
  /// What the index files may take with `records` live in `segments` and a journal of
  /// `journal_bytes`, the fixed files included.
  [[nodiscard]] uint64_t index_bytes(uint64_t records, uint64_t segments,
                                     uint64_t journal_bytes) const;
  /// What the home directory holds besides segments now.
  [[nodiscard]] uint64_t home_files(uint64_t journal_bytes) const;

 private:
  uint64_t capacity_ = 0;
  uint64_t segment_bytes_ = 0;
  uint64_t fixed_bytes_ = 0;       // lock, manifest (or its temp file), probe, directories
  uint64_t journal_floor_ = 0;     // the least journal_budget() gives
  uint64_t checkpoint_disk_ = 0;   // what index.ckpt takes now
  uint64_t segment_estimate_ = 0;  // what a segment not yet made will take
};

}  // namespace kvtier
