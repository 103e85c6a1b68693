// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the store takes against its capacity, what a save may be admitted to, and eviction of the
// least recently used segments.
#include <algorithm>

#include <fmt/format.h>

#include "api/try.hpp"
#include "store/store.hpp"

namespace kvtier {

uint64_t Store::journal_budget_locked() const {
  return budget_.journal_budget(index_.all() + reserved_records_, segments_.size());
}

uint64_t Store::index_bytes_locked(uint64_t records, uint64_t segments) const {
  return budget_.index_bytes(records, segments, journal_ ? journal_->journal_bytes() : 0);
}

uint64_t Store::used_locked(uint64_t extra_segments) const {
  return used_on_locked(0, extra_segments, extra_segments);
}

uint64_t Store::used_on_locked(uint32_t drive, uint64_t extra_segments,
                               uint64_t extra_total) const {
  uint64_t bytes = extra_segments * budget_.segment_estimate();
  bytes += segments_.disk_bytes_on(drive);
  if (drive != 0) return bytes;  // the index files live on the home drive only
  // Records reserved by writers are counted as if committed: the next checkpoint may hold them.
  return bytes +
         index_bytes_locked(index_.all() + reserved_records_, segments_.size() + extra_total);
}

uint64_t Store::capacity_on(uint32_t drive) const {
  const uint64_t limit = drives_[drive].fs_limit;
  return limit == 0 ? budget_.capacity() : std::min(budget_.capacity(), limit);
}

const Store::Segment* Store::lru_locked(std::optional<uint32_t> drive) const {
  return segments_.least_recently_used([&](const Segment& seg) {
    return drive ? seg.drive == *drive : drives_[seg.drive].takes_new_segments();
  });
}

Status Store::enforce_capacity_locked(uint64_t extra_segments, uint32_t drive) {
  for (uint32_t d = 0; d < drives_.size(); ++d) {
    const uint64_t extra = d == drive ? extra_segments : 0;
    while (drives_[d].takes_new_segments() &&
           used_on_locked(d, extra, extra_segments) > capacity_on(d)) {
      const Segment* victim = lru_locked(d);
      if (victim == nullptr) {
        const uint64_t index =
            index_bytes_locked(index_.served() + reserved_records_, segments_.size());
        return {ErrorCode::kCapacity,
                fmt::format(
                    "store {} is full: {} segments of {} bytes in use by writers and {} "
                    "bytes of index files, capacity {} bytes{}",
                    dir_, segments_.size(), budget_.segment_bytes(), index, capacity_on(d),
                    drives_.size() > 1 ? fmt::format(" per drive ({} full)", drives_[d].dir) : "")};
      }
      KVTIER_TRY(evict_segment_locked(victim->file->id));
    }
  }
  return {};
}

Status Store::evict_segment_locked(uint32_t id) {
  const JournalEntry drop{JournalOp::kDropSegment, {}, id};
  Status journaled = append_locked(std::span(&drop, 1));
  if (journaled.code() == ErrorCode::kNoSpace) {
    remove_segment_file_locked(segments_.at(id));
    journaled = append_locked(std::span(&drop, 1));
  }
  KVTIER_TRY(journaled);
  Segment& seg = segments_.at(id);
  const uint64_t records = seg.records;
  evicted_records_ += records;
  ++evicted_segments_;
  for (const Key128& key : seg.keys) {
    // A key listed twice (dropped, then stored here again) is found once: the first removal ends
    // it.
    if (const RecordMeta* meta = index_.find(key); meta != nullptr && meta->segment == id) {
      index_remove_locked(RecordMeta(*meta));
    }
  }
  // Readers holding the SegmentFile keep reading the unlinked file; its bytes are never reused.
  remove_segment_file_locked(seg);
  segments_.erase(id);
  if (active_ == id) active_ = 0;
  KVTIER_LOG(*log_, kDebug, "{}: evicted segment {} ({} records)", dir_, id, records);
  return {};
}

void Store::remove_segment_file_locked(const Segment& seg) {
  // A file not removed (a drive gone or read-only) has no unlink to make durable.
  if (fs_->remove(seg.file->path).ok()) drives_[seg.drive].unsynced_removal = true;
}

Store::PlacementPlan Store::plan_placement_locked(std::span<const uint64_t> sizes) const {
  PlacementPlan plan;
  bool open_segment = active_ != 0;
  uint64_t offset = open_segment ? segments_.at(active_).write_offset : 0;
  for (uint64_t size : sizes) {
    if (!open_segment || offset + size > budget_.segment_bytes()) {
      ++plan.new_segments;
      open_segment = true;
      offset = 0;
    } else if (plan.new_segments == 0) {
      plan.uses_active = true;
    }
    offset += size;
  }
  return plan;
}

Status Store::admit_locked(std::span<const uint64_t> sizes) const {
  uint64_t total = 0;
  for (uint64_t size : sizes) {
    if (size > budget_.segment_bytes()) {
      return {ErrorCode::kCapacity,
              fmt::format("store {}: a {}-byte record cannot fit in its {}-byte segments", dir_,
                          size, budget_.segment_bytes())};
    }
    total += size;
  }
  const PlacementPlan plan = plan_placement_locked(sizes);
  // What is left with every evictable segment gone, first counting only this save's own segments,
  // then those eviction may not take: the ones other writers have pinned (with the records they
  // reserved), and the active one when this save appends to it.
  uint64_t own_bytes = plan.new_segments * budget_.segment_estimate(), own_records = sizes.size();
  uint64_t kept_bytes = own_bytes, kept_records = own_records + reserved_records_;
  uint64_t own_segments = plan.new_segments, kept_segments = plan.new_segments;
  for (const auto& [id, seg] : segments_) {
    const bool appended_to = id == active_ && plan.uses_active;
    if (appended_to) {
      own_bytes += seg.disk_bytes;
      own_records += seg.records;
      ++own_segments;
    }
    if (seg.pins > 0 || appended_to) {
      kept_bytes += seg.disk_bytes;
      kept_records += seg.records;
      ++kept_segments;
    }
  }
  const uint64_t own = own_bytes + index_bytes_locked(own_records, own_segments);
  // Several drives: their capacities add up (each new segment still goes where it fits).
  uint64_t room = 0;
  for (uint32_t d = 0; d < drives_.size(); ++d) {
    room += drives_[d].takes_new_segments() ? capacity_on(d) : 0;
  }
  if (own > room) {
    return {ErrorCode::kCapacity,
            fmt::format("store {}: a save of {} bytes needs {} bytes on disk ({} segments of {} "
                        "bytes and the index files), more than the capacity of {} bytes",
                        dir_, total, own, own_segments, budget_.segment_bytes(), room)};
  }
  if (kept_bytes + index_bytes_locked(kept_records, kept_segments) > room) {
    return {ErrorCode::kCapacity,
            fmt::format("store {} is full: {} segments of {} bytes in use by writers, capacity {} "
                        "bytes; this save needs {} more",
                        dir_, kept_segments - plan.new_segments, budget_.segment_bytes(), room,
                        plan.new_segments)};
  }
  return {};
}

}  // namespace kvtier
