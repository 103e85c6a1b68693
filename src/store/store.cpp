// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's running state: lookups, reservations and commits, drops, reads and writes of record
// bytes, listings and stats.
#include "store/store.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/try.hpp"

namespace kvtier {

Store::~Store() {
  if (!journal_) return;
  std::lock_guard lock(mu_);
  Status st = append_locked({});
  if (!st.ok()) {
    KVTIER_LOG(*log_, kWarn, "{}: recording segment uses at close: {}", dir_, st.to_string());
  }
}

void Store::index_add_locked(const RecordMeta& meta) {
  index_.add(meta);
  Segment& seg = segments_.at(meta.segment);
  seg.live_bytes += meta.record_bytes();
  seg.records += 1;
  seg.tokens += meta.token_count;
  seg.write_offset = std::max(seg.write_offset, meta.end());
  seg.last_use = std::max(seg.last_use, meta.sequence);
  seg.keys.push_back(meta.key);
}

void Store::index_remove_locked(const RecordMeta& meta) {
  if (auto it = segments_.find(meta.segment); it != segments_.end()) {
    it->second.live_bytes -= meta.record_bytes();
    it->second.records -= 1;
    it->second.tokens -= meta.token_count;
  }
  index_.remove(meta);
}

std::vector<LocatedRecord> Store::find_chain(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  std::vector<LocatedRecord> out;
  for (const Key128& key : keys) {
    const RecordMeta* meta = index_.find(key);
    if (meta == nullptr) {
      if (index_.offline(key)) ++drive_misses_;
      break;
    }
    Segment& seg = segments_.at(meta->segment);
    touch_locked(seg);
    out.push_back({*meta, seg.file});
  }
  return out;
}

std::vector<RecordMeta> Store::partial_children(const Key128& parent) {
  std::lock_guard lock(mu_);
  return index_.partial_children(parent);
}

std::optional<LocatedRecord> Store::find(const Key128& key) {
  std::lock_guard lock(mu_);
  const RecordMeta* meta = index_.find(key);
  if (meta == nullptr) {
    if (index_.offline(key)) ++drive_misses_;
    return std::nullopt;
  }
  Segment& seg = segments_.at(meta->segment);
  touch_locked(seg);
  return LocatedRecord{*meta, seg.file};
}

bool Store::contains(const Key128& key) {
  std::lock_guard lock(mu_);
  return index_.contains(key);
}

Result<std::vector<Placement>> Store::reserve(std::span<const uint64_t> sizes) {
  std::lock_guard lock(mu_);
  if (read_only()) return fail(directory_.refuse_read_only());
  KVTIER_TRY(apply_pending_capacity_locked());
  // Decided before anything is evicted: a save that cannot fit must not cost the sessions stored.
  KVTIER_TRY(admit_locked(sizes));
  reserved_records_ += sizes.size();
  uint64_t new_segments = plan_placement_locked(sizes).new_segments;
  std::vector<Placement> out;
  out.reserve(sizes.size());
  auto undo = [&](const Status& st) -> Result<std::vector<Placement>> {
    for (const Placement& p : out) --segments_.at(p.file->id).pins;
    reserved_records_ -= sizes.size();
    return fail(st);
  };
  for (uint64_t size : sizes) {
    Segment* seg = active_ != 0 ? &segments_.at(active_) : nullptr;
    if (seg == nullptr || seg->write_offset + size > budget_.segment_bytes()) {
      // The segment being left may be evicted now if it is the least recently used: admission
      // counted it as evictable unless this save (or another writer) has pinned it.
      auto fresh = new_segment_locked(std::max<uint64_t>(new_segments, 1));
      if (!fresh) return undo(fresh.error());
      seg = *fresh;
      new_segments -= new_segments > 0 ? 1 : 0;
    }
    out.push_back({seg->file, seg->write_offset, ++sequence_});
    seg->write_offset += size;
    seg->last_use = sequence_;
    ++seg->pins;
  }
  // The records' share of the next checkpoint may need room even when no segment was made.
  if (Status st = enforce_capacity_locked(0); !st.ok()) return undo(st);
  return out;
}

Status Store::admit(std::span<const uint64_t> sizes) {
  std::lock_guard lock(mu_);
  if (read_only()) return directory_.refuse_read_only();
  KVTIER_TRY(apply_pending_capacity_locked());
  return admit_locked(sizes);
}

void Store::abort(std::span<const Placement> placements) {
  std::lock_guard lock(mu_);
  release_locked(placements);
}

void Store::release_locked(std::span<const Placement> placements) {
  for (const Placement& p : placements) --segments_.at(p.file->id).pins;
  reserved_records_ -= placements.size();
}

Status Store::commit(std::span<const RecordMeta> records, std::span<const Placement> placements) {
  std::set<SegmentFile*> synced;
  for (const Placement& p : placements) {
    if (!synced.insert(p.file.get()).second) continue;
    Status st = p.file->file->sync();
    if (st.ok()) st = check_still_linked(*p.file);
    if (!st.ok()) {
      abort(placements);
      return st;
    }
  }
  std::lock_guard lock(mu_);
  std::vector<JournalEntry> entries;
  for (const RecordMeta& m : records) {
    if (!index_.contains(m.key)) entries.push_back({JournalOp::kAdd, m, 0});
  }
  release_locked(placements);
  std::vector<Key128> added;
  Status st = append_locked(entries, [&](const JournalEntry& e) {
    index_add_locked(e.meta);
    Segment& seg = segments_.at(e.meta.segment);
    seg.saved_use = std::max(seg.saved_use, e.meta.sequence);  // an add records its write as a use
    sequence_ = std::max(sequence_, e.meta.sequence);
    added.push_back(e.meta.key);
  });
  if (st.ok() || added.empty()) return st;
  // A long list goes in several appends, and a later one failed: the save is reported failed, so
  // the records the earlier ones made visible are dropped again (not counted as evictions).
  const uint64_t evicted = evicted_records_;
  Status undone = drop_locked(added);
  evicted_records_ = evicted;
  if (!undone.ok()) {
    KVTIER_LOG(*log_, kWarn,
               "{}: {} records of a failed save could not be dropped again ({}): they stay, each "
               "as verified as any other",
               dir_, added.size(), undone.to_string());
  }
  return st;
}

Status Store::drop(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  return drop_locked(keys);
}

Status Store::drop_corrupt(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  if (!read_only()) return drop_locked(keys);
  for (const Key128& key : keys) {
    if (index_.erase_offline(key)) continue;
    if (const RecordMeta* meta = index_.find(key)) index_remove_locked(RecordMeta(*meta));
  }
  return {};
}

Status Store::drop_locked(std::span<const Key128> keys) {
  std::vector<JournalEntry> entries;
  for (const Key128& key : keys) {
    if (index_.contains(key) || index_.offline(key)) {
      entries.push_back({JournalOp::kDropRecord, RecordMeta{key}, 0});
    }
  }
  // A refused drop changes nothing, not even what this process serves: it may be an eviction the
  // caller asked for, which must not half happen.
  if (read_only()) return entries.empty() ? Status{} : directory_.refuse_read_only();
  std::set<uint32_t> touched;
  KVTIER_TRY(append_locked(entries, [&](const JournalEntry& e) {
    if (index_.erase_offline(e.meta.key)) {
      ++evicted_records_;
      return;
    }
    const RecordMeta meta = *index_.find(e.meta.key);
    touched.insert(meta.segment);
    index_remove_locked(meta);
    ++evicted_records_;
  }));
  for (uint32_t id : touched) {
    const Segment& seg = segments_.at(id);
    if (seg.records == 0 && seg.pins == 0 && id != active_) KVTIER_TRY(evict_segment_locked(id));
  }
  return {};
}

std::vector<RecordMeta> Store::live_records_locked() const { return index_.live(); }

Status Store::read_bytes(const SegmentFile& file, std::span<std::byte> out, uint64_t offset) {
  return file.file->read_at(out, offset);
}

uint32_t StoreConfig::dir_depth() const {
  return 1 + static_cast<uint32_t>(std::count(dir_name.begin(), dir_name.end(), '/'));
}

StoreConfig StoreConfig::of(const Options& o, std::shared_ptr<FileSystem> fs) {
  StoreConfig c;
  c.roots.push_back(o.root);
  c.roots.insert(c.roots.end(), o.extra_roots.begin(), o.extra_roots.end());
  c.geometry = o.geometry;
  c.geometry.kv_heads_total = 0;      // a store keeps its own slice's shape
  c.record_version = o.store_format;  // format 1 or 2: the store's and its records' alike
  c.capacity_bytes = o.capacity_bytes;
  c.segment_bytes = o.segment_bytes;
  c.create_if_missing = o.create_if_missing;
  c.read_only = o.read_only;
  c.try_direct_io = o.io_path != IoPath::kBuffered;
  c.fs = std::move(fs);
  return c;
}

Result<std::shared_ptr<SegmentFile>> Store::reopen_buffered(const SegmentFile& file) {
  KVTIER_ASSIGN_OR_RETURN(
      std::shared_ptr<SegmentFile> seg,
      open_segment(*fs_, std::filesystem::path(file.path).parent_path().string(), file.id,
                   /*direct=*/false, /*read_only=*/true));
  seg->drive = file.drive;
  return seg;
}

Status Store::write_bytes(const SegmentFile& file, std::span<const std::byte> bytes,
                          uint64_t offset) {
  return file.file->write_at(bytes, offset);
}

std::vector<LocatedRecord> Store::all_records() {
  std::lock_guard lock(mu_);
  std::vector<LocatedRecord> out;
  for (const RecordMeta& meta : index_.served_records()) {
    out.push_back({meta, segments_.at(meta.segment).file});
  }
  std::sort(out.begin(), out.end(), [](const LocatedRecord& a, const LocatedRecord& b) {
    return std::pair(a.meta.segment, a.meta.offset) < std::pair(b.meta.segment, b.meta.offset);
  });
  return out;
}

std::vector<SegmentInfo> Store::segments() {
  std::lock_guard lock(mu_);
  std::vector<SegmentInfo> out;
  for (const auto& [id, seg] : segments_) {
    out.push_back({id, seg.file->size, seg.write_offset, seg.live_bytes, seg.records, seg.tokens,
                   seg.drive, drives_[seg.drive].dir});
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.id < b.id; });
  return out;
}

std::vector<DriveSample> Store::drive_samples() {
  std::lock_guard lock(mu_);
  std::vector<DriveSample> out(drives_.size());
  for (size_t d = 0; d < drives_.size(); ++d) {
    out[d].drive = static_cast<uint32_t>(d);
    out[d].dir = drives_[d].dir;
    out[d].available = drives_[d].available;
    out[d].unwritable = drives_[d].unwritable;
  }
  for (const auto& [id, seg] : segments_) {
    if (seg.pins > 0) continue;
    DriveSample& s = out.at(seg.drive);
    if (seg.write_offset > s.largest_written) {
      s.largest_written = seg.write_offset;
      s.largest = seg.file;
    }
  }
  return out;
}

uint64_t Store::segment_bytes() {
  std::lock_guard lock(mu_);
  return budget_.segment_bytes();
}

void Store::fill_stats(Stats& stats) {
  std::lock_guard lock(mu_);
  stats.capacity_bytes =
      budget_.capacity() * std::max<uint64_t>(1, drives_.size() - offline_drives());
  stats.segment_bytes = budget_.segment_bytes();
  stats.segments = segments_.size();
  stats.used_bytes = segments_.size() * budget_.segment_bytes();
  stats.records = index_.served();
  stats.live_bytes = segments_.live_bytes();
  stats.evicted_segments = evicted_segments_;
  stats.evicted_records = evicted_records_;
  stats.recovered_records = recovered_records_;
  stats.dropped_at_open = dropped_at_open_;
  stats.drives = drives_.size();
  stats.drives_offline = offline_drives();
  stats.offline_records = index_.offline_count();
  stats.drive_misses = drive_misses_;
  stats.drives_out_of_placement =
      static_cast<uint64_t>(std::count_if(drives_.begin(), drives_.end(), [](const Drive& d) {
        return d.available && !d.unwritable.empty();
      }));
  std::vector<std::string> problems;
  for (const Drive& d : drives_) {
    if (!d.available) problems.push_back(d.problem);
    if (!d.unwritable.empty()) problems.push_back(d.unwritable);
    if (d.fs_limit != 0) {
      problems.push_back(fmt::format("{}: file system full: the store takes at most {} bytes there",
                                     d.dir, d.fs_limit));
    }
  }
  stats.drive_problem = fmt::format("{}", fmt::join(problems, "; "));
}

}  // namespace kvtier
