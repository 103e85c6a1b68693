// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's running state: lookups, reservations and commits, drops, eviction, checkpoints.
#include "store/store.hpp"

#include <fcntl.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/try.hpp"

namespace kvtier {
namespace {

// Uses are recorded in the journal along with the next write, at close, or by a lookup once the
// oldest unrecorded one is this old: at most one extra journal sync per interval for readers.
constexpr auto kUseFlushInterval = std::chrono::seconds(10);

}  // namespace

Store::~Store() {
  if (!journal_) return;
  std::lock_guard lock(mu_);
  Status st = append_locked({});
  if (!st.ok()) {
    KVTIER_LOG(*log_, kWarn, "{}: recording segment uses at close: {}", dir_, st.to_string());
  }
}

void Store::index_add_locked(const RecordMeta& meta) {
  offline_.erase(meta.key);  // stored again: the copy on a missing drive is older
  index_[meta.key] = meta;
  Segment& seg = segments_.at(meta.segment);
  seg.live_bytes += meta.record_bytes();
  seg.records += 1;
  seg.tokens += meta.token_count;
  seg.write_offset = std::max(seg.write_offset, meta.end());
  seg.last_use = std::max(seg.last_use, meta.sequence);
  seg.keys.push_back(meta.key);
  if (meta.token_count < geometry_.chunk_tokens) partials_[meta.parent].push_back(meta.key);
}

void Store::index_remove_locked(const RecordMeta& meta) {
  if (auto it = segments_.find(meta.segment); it != segments_.end()) {
    it->second.live_bytes -= meta.record_bytes();
    it->second.records -= 1;
    it->second.tokens -= meta.token_count;
  }
  if (meta.token_count < geometry_.chunk_tokens) {
    auto it = partials_.find(meta.parent);
    if (it != partials_.end()) {
      std::erase(it->second, meta.key);
      if (it->second.empty()) partials_.erase(it);
    }
  }
  index_.erase(meta.key);
}

std::vector<LocatedRecord> Store::find_chain(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  std::vector<LocatedRecord> out;
  for (const Key128& key : keys) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      if (offline_.contains(key)) ++drive_misses_;
      break;
    }
    Segment& seg = segments_.at(it->second.segment);
    touch_locked(seg);
    out.push_back({it->second, seg.file});
  }
  return out;
}

std::vector<RecordMeta> Store::partial_children(const Key128& parent) {
  std::lock_guard lock(mu_);
  std::vector<RecordMeta> out;
  if (auto it = partials_.find(parent); it != partials_.end()) {
    for (const Key128& key : it->second) out.push_back(index_.at(key));
  }
  return out;
}

std::optional<LocatedRecord> Store::find(const Key128& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    if (offline_.contains(key)) ++drive_misses_;
    return std::nullopt;
  }
  Segment& seg = segments_.at(it->second.segment);
  touch_locked(seg);
  return LocatedRecord{it->second, seg.file};
}

bool Store::contains(const Key128& key) {
  std::lock_guard lock(mu_);
  return index_.contains(key);
}

uint64_t Store::journal_budget_locked() const {
  // A checkpoint writes the whole index, so it waits for as many journal bytes as it writes: each
  // journal entry then costs O(1) checkpoint bytes however large the index grows.
  const uint64_t index =
      checkpoint_image_bytes(index_.size() + offline_.size() + reserved_records_, segments_.size());
  return std::max(journal_floor_, align_up(index));
}

uint64_t Store::index_bytes_locked(uint64_t records, uint64_t segments) const {
  const uint64_t next = align_up(checkpoint_image_bytes(records, segments));
  // The journal may still be longer than the budget an index that has since shrunk allows: it
  // is compacted at its next append, and counted as it is until then.
  const uint64_t journal =
      std::max({journal_floor_, next, journal_ ? align_up(journal_->journal_bytes()) : 0});
  // While a checkpoint is written its predecessor is still on disk: room for two of the larger.
  return fixed_bytes_ + journal + 2 * std::max(checkpoint_disk_, next);
}

uint64_t Store::used_locked(uint64_t extra_segments) const {
  return used_on_locked(0, extra_segments, extra_segments);
}

uint64_t Store::used_on_locked(uint32_t drive, uint64_t extra_segments,
                               uint64_t extra_total) const {
  uint64_t bytes = extra_segments * segment_estimate_;
  for (const auto& [id, seg] : segments_) bytes += seg.drive == drive ? seg.disk_bytes : 0;
  if (drive != 0) return bytes;  // the index files live on the home drive only
  // Records reserved by writers are counted as if committed: the next checkpoint may hold them.
  return bytes + index_bytes_locked(index_.size() + offline_.size() + reserved_records_,
                                    segments_.size() + extra_total);
}

uint64_t Store::capacity_on(uint32_t drive) const {
  const uint64_t limit = drives_[drive].fs_limit;
  return limit == 0 ? capacity_ : std::min(capacity_, limit);
}

const Store::Segment* Store::lru_locked(std::optional<uint32_t> drive) const {
  const Segment* victim = nullptr;
  for (const auto& [id, seg] : segments_) {
    if (seg.pins > 0 || (drive && seg.drive != *drive)) continue;
    if (!drive && !drives_[seg.drive].takes_new_segments()) continue;
    if (victim == nullptr || seg.last_use < victim->last_use) victim = &seg;
  }
  return victim;
}

Status Store::enforce_capacity_locked(uint64_t extra_segments, uint32_t drive) {
  for (uint32_t d = 0; d < drives_.size(); ++d) {
    const uint64_t extra = d == drive ? extra_segments : 0;
    while (drives_[d].takes_new_segments() &&
           used_on_locked(d, extra, extra_segments) > capacity_on(d)) {
      const Segment* victim = lru_locked(d);
      if (victim == nullptr) {
        const uint64_t index =
            index_bytes_locked(index_.size() + reserved_records_, segments_.size());
        return {ErrorCode::kCapacity,
                fmt::format(
                    "store {} is full: {} segments of {} bytes in use by writers and {} "
                    "bytes of index files, capacity {} bytes{}",
                    dir_, segments_.size(), segment_bytes_, index, capacity_on(d),
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
    static_cast<void>(fs_->remove(segments_.at(id).file->path));
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
    if (auto it = index_.find(key); it != index_.end() && it->second.segment == id) {
      const RecordMeta meta = it->second;
      index_remove_locked(meta);
    }
  }
  // Readers holding the SegmentFile keep reading the unlinked file; its bytes are never reused.
  static_cast<void>(fs_->remove(seg.file->path));
  segments_.erase(id);
  if (active_ == id) active_ = 0;
  KVTIER_LOG(*log_, kDebug, "{}: evicted segment {} ({} records)", dir_, id, records);
  return {};
}

Store::PlacementPlan Store::plan_placement_locked(std::span<const uint64_t> sizes) const {
  PlacementPlan plan;
  bool open_segment = active_ != 0;
  uint64_t offset = open_segment ? segments_.at(active_).write_offset : 0;
  for (uint64_t size : sizes) {
    if (!open_segment || offset + size > segment_bytes_) {
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
    if (size > segment_bytes_) {
      return {ErrorCode::kCapacity,
              fmt::format("store {}: a {}-byte record cannot fit in its {}-byte segments", dir_,
                          size, segment_bytes_)};
    }
    total += size;
  }
  const PlacementPlan plan = plan_placement_locked(sizes);
  // What is left with every evictable segment gone, first counting only this save's own segments,
  // then those eviction may not take: the ones other writers have pinned (with the records they
  // reserved), and the active one when this save appends to it.
  uint64_t own_bytes = plan.new_segments * segment_estimate_, own_records = sizes.size();
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
                        dir_, total, own, own_segments, segment_bytes_, room)};
  }
  if (kept_bytes + index_bytes_locked(kept_records, kept_segments) > room) {
    return {ErrorCode::kCapacity,
            fmt::format("store {} is full: {} segments of {} bytes in use by writers, capacity {} "
                        "bytes; this save needs {} more",
                        dir_, kept_segments - plan.new_segments, segment_bytes_, room,
                        plan.new_segments)};
  }
  return {};
}

Result<std::vector<Placement>> Store::reserve(std::span<const uint64_t> sizes) {
  std::lock_guard lock(mu_);
  if (read_only_) return fail(refuse_read_only());
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
    if (seg == nullptr || seg->write_offset + size > segment_bytes_) {
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

Status Store::drop_locked(std::span<const Key128> keys) {
  std::vector<JournalEntry> entries;
  for (const Key128& key : keys) {
    if (index_.contains(key) || offline_.contains(key)) {
      entries.push_back({JournalOp::kDropRecord, RecordMeta{key}, 0});
    }
  }
  // A refused drop changes nothing, not even what this process serves: it may be an eviction the
  // caller asked for, which must not half happen.
  if (read_only_) return entries.empty() ? Status{} : refuse_read_only();
  std::set<uint32_t> touched;
  KVTIER_TRY(append_locked(entries, [&](const JournalEntry& e) {
    if (offline_.erase(e.meta.key) > 0) {
      ++evicted_records_;
      return;
    }
    const RecordMeta meta = index_.at(e.meta.key);
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

Status Store::checkpoint_locked() {
  std::vector<SegmentUse> uses;
  uses.reserve(segments_.size());
  for (const auto& [id, seg] : segments_) uses.push_back({id, seg.last_use});
  const std::vector<RecordMeta> live = live_records_locked();
  KVTIER_TRY(journal_->checkpoint(live, uses));
  checkpoint_disk_ = align_up(checkpoint_image_bytes(live.size(), uses.size()));
  for (auto& [id, seg] : segments_) seg.saved_use = seg.last_use;
  unsaved_since_.reset();
  return {};
}

std::vector<JournalEntry> Store::unsaved_uses_locked() const {
  std::vector<JournalEntry> uses;
  for (const auto& [id, seg] : segments_) {
    if (seg.last_use > seg.saved_use) uses.push_back({JournalOp::kUse, {}, id, seg.last_use});
  }
  return uses;
}

Status Store::append_locked(std::span<const JournalEntry> entries,
                            const std::function<void(const JournalEntry&)>& apply) {
  if (!journal_) return refuse_read_only();
  // No batch fills more than half the budget, so one always fits once the journal is compacted.
  const uint64_t batch_limit = journal_floor_ / 2;
  size_t next = 0;
  for (;;) {
    // Uses go first: a drop of the same segment later in the batch must win at replay.
    std::vector<JournalEntry> batch = unsaved_uses_locked();
    const size_t uses = batch.size();
    uint64_t bytes = 0;
    for (const JournalEntry& e : batch) bytes += journal_entry_bytes(e.op);
    size_t end = next;
    while (end < entries.size()) {
      const uint64_t more = journal_entry_bytes(entries[end].op);
      if (end > next && bytes + more > batch_limit) break;
      bytes += more;
      ++end;
    }
    const uint64_t journal = journal_->journal_bytes();
    if (journal > 0 && journal + bytes > journal_budget_locked()) {
      // Compact: the checkpoint holds everything applied so far, every use included, and the
      // journal starts empty; the batch is then made again (without the uses).
      KVTIER_TRY(checkpoint_locked());
      continue;
    }
    batch.insert(batch.end(), entries.begin() + static_cast<std::ptrdiff_t>(next),
                 entries.begin() + static_cast<std::ptrdiff_t>(end));
    KVTIER_TRY(journal_->append(batch));
    for (size_t i = 0; i < uses; ++i) segments_.at(batch[i].segment).saved_use = batch[i].use;
    if (uses > 0) unsaved_since_.reset();
    if (apply) {
      for (size_t i = next; i < end; ++i) apply(entries[i]);
    }
    next = end;
    if (next == entries.size()) return {};
  }
}

Status Store::refuse_read_only() const {
  return {ErrorCode::kPermission, fmt::format("store opened read-only: {}", read_only_reason_)};
}

void Store::touch_locked(Segment& seg) {
  seg.last_use = ++sequence_;
  if (read_only_) return;  // recency is not worth a write the store may not make
  const auto now = std::chrono::steady_clock::now();
  if (!unsaved_since_) unsaved_since_ = now;
  if (now - *unsaved_since_ < kUseFlushInterval) return;
  // Recency is a hint: failing to record it must not fail the lookup that made it.
  Status st = append_locked({});
  if (!st.ok()) KVTIER_LOG(*log_, kWarn, "{}: recording segment uses: {}", dir_, st.to_string());
}

std::vector<RecordMeta> Store::live_records_locked() const {
  std::vector<RecordMeta> out;
  out.reserve(index_.size() + offline_.size());
  for (const auto& [key, meta] : index_) out.push_back(meta);
  for (const auto& [key, meta] : offline_) out.push_back(meta);
  return out;
}

Status Store::read_bytes(const SegmentFile& file, std::span<std::byte> out, uint64_t offset,
                         bool buffered) {
  if (!buffered || !file.direct) return file.file->read_at(out, offset);
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<File> plain, fs_->open(file.path, O_RDONLY));
  return plain->read_at(out, offset);
}

Status Store::write_bytes(const SegmentFile& file, std::span<const std::byte> bytes,
                          uint64_t offset) {
  return file.file->write_at(bytes, offset);
}

std::vector<LocatedRecord> Store::all_records() {
  std::lock_guard lock(mu_);
  std::vector<LocatedRecord> out;
  for (const auto& [key, meta] : index_) out.push_back({meta, segments_.at(meta.segment).file});
  std::sort(out.begin(), out.end(), [](const LocatedRecord& a, const LocatedRecord& b) {
    return std::pair(a.meta.segment, a.meta.offset) < std::pair(b.meta.segment, b.meta.offset);
  });
  return out;
}

std::vector<SegmentInfo> Store::segments() {
  std::lock_guard lock(mu_);
  std::vector<SegmentInfo> out;
  for (const auto& [id, seg] : segments_) {
    out.push_back({id, seg.file->size, seg.write_offset, seg.live_bytes, seg.records, seg.tokens});
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.id < b.id; });
  return out;
}

void Store::fill_stats(Stats& stats) {
  std::lock_guard lock(mu_);
  stats.capacity_bytes = capacity_ * std::max<uint64_t>(1, drives_.size() - offline_drives());
  stats.segment_bytes = segment_bytes_;
  stats.segments = segments_.size();
  stats.used_bytes = segments_.size() * segment_bytes_;
  stats.records = index_.size();
  stats.live_bytes = 0;
  for (const auto& [id, seg] : segments_) stats.live_bytes += seg.live_bytes;
  stats.evicted_segments = evicted_segments_;
  stats.evicted_records = evicted_records_;
  stats.recovered_records = recovered_records_;
  stats.dropped_at_open = dropped_at_open_;
  stats.drives = drives_.size();
  stats.drives_offline = offline_drives();
  stats.offline_records = offline_.size();
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
