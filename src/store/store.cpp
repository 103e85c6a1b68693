// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's running state: lookups, reservations and commits, drops, eviction, checkpoints.
#include "store/store.hpp"

#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

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
  if (!st.ok()) KVTIER_LOG(*log_, kWarn, "{}: recording segment uses at close: {}", dir_, st.to_string());
}

void Store::index_add_locked(const RecordMeta& meta) {
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
    if (it == index_.end()) break;
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
  if (it == index_.end()) return std::nullopt;
  Segment& seg = segments_.at(it->second.segment);
  touch_locked(seg);
  return LocatedRecord{it->second, seg.file};
}

bool Store::contains(const Key128& key) {
  std::lock_guard lock(mu_);
  return index_.contains(key);
}

Status Store::enforce_capacity_locked(uint64_t reserve_segments) {
  while ((segments_.size() + reserve_segments) * segment_bytes_ > capacity_) {
    const Segment* victim = nullptr;
    for (const auto& [id, seg] : segments_) {
      if (seg.pins == 0 && (victim == nullptr || seg.last_use < victim->last_use)) victim = &seg;
    }
    if (victim == nullptr) {
      return {ErrorCode::kCapacity,
              fmt::format("store {} is full: {} segments of {} bytes in use by writers, capacity {} "
                          "bytes", dir_, segments_.size(), segment_bytes_, capacity_)};
    }
    KVTIER_TRY(evict_segment_locked(victim->file->id));
  }
  return {};
}

Status Store::evict_segment_locked(uint32_t id) {
  KVTIER_TRY(append_locked({JournalEntry{JournalOp::kDropSegment, {}, id}}));
  Segment& seg = segments_.at(id);
  const uint64_t records = seg.records;
  evicted_records_ += records;
  ++evicted_segments_;
  for (const Key128& key : seg.keys) {
    // A key listed twice (dropped, then stored here again) is found once: the first removal ends it.
    if (auto it = index_.find(key); it != index_.end() && it->second.segment == id) {
      const RecordMeta meta = it->second;
      index_remove_locked(meta);
    }
  }
  // Readers holding the SegmentFile keep reading the unlinked file; its bytes are never reused.
  ::unlink(seg.file->path.c_str());
  segments_.erase(id);
  if (active_ == id) active_ = 0;
  KVTIER_LOG(*log_, kDebug, "{}: evicted segment {} ({} records)", dir_, id, records);
  return {};
}

Result<Store::Segment*> Store::new_segment_locked() {
  KVTIER_TRY(enforce_capacity_locked(1));
  uint32_t id = next_id_++;
  KVTIER_ASSIGN_OR_RETURN(auto file, create_segment(dir_, id, segment_bytes_, direct_));
  Segment& seg = segments_[id];
  seg.file = std::move(file);
  seg.last_use = ++sequence_;
  active_ = id;
  return &seg;
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
              fmt::format("store {}: a {}-byte record cannot fit in its {}-byte segments", dir_, size,
                          segment_bytes_)};
    }
    total += size;
  }
  const PlacementPlan plan = plan_placement_locked(sizes);
  const uint64_t limit = capacity_ / segment_bytes_;
  const uint64_t own = plan.new_segments + (plan.uses_active ? 1 : 0);
  if (own > limit) {
    return {ErrorCode::kCapacity,
            fmt::format("store {}: a save of {} bytes needs {} segments of {} bytes; capacity {} bytes "
                        "holds {}", dir_, total, own, segment_bytes_, capacity_, limit)};
  }
  // Segments eviction may not take: those other writers have pinned, and the active one when this
  // save appends to it.
  uint64_t kept = 0;
  for (const auto& [id, seg] : segments_) kept += seg.pins > 0 || (id == active_ && plan.uses_active);
  if (kept + plan.new_segments > limit) {
    return {ErrorCode::kCapacity,
            fmt::format("store {} is full: {} segments of {} bytes in use by writers, capacity {} bytes; "
                        "this save needs {} more", dir_, kept, segment_bytes_, capacity_,
                        plan.new_segments)};
  }
  return {};
}

Result<std::vector<Placement>> Store::reserve(std::span<const uint64_t> sizes) {
  std::lock_guard lock(mu_);
  // Decided before anything is evicted: a save that cannot fit must not cost the sessions stored.
  KVTIER_TRY(admit_locked(sizes));
  std::vector<Placement> out;
  out.reserve(sizes.size());
  for (uint64_t size : sizes) {
    Segment* seg = active_ != 0 ? &segments_.at(active_) : nullptr;
    if (seg == nullptr || seg->write_offset + size > segment_bytes_) {
      // The segment being left may be evicted now if it is the least recently used: admission
      // counted it as evictable unless this save (or another writer) has pinned it.
      auto fresh = new_segment_locked();
      if (!fresh) {
        for (const Placement& p : out) --segments_.at(p.file->id).pins;
        return fail(fresh.error());
      }
      seg = *fresh;
    }
    out.push_back({seg->file, seg->write_offset, ++sequence_});
    seg->write_offset += size;
    seg->last_use = sequence_;
    ++seg->pins;
  }
  return out;
}

void Store::abort(std::span<const Placement> placements) {
  std::lock_guard lock(mu_);
  for (const Placement& p : placements) --segments_.at(p.file->id).pins;
}

Status Store::commit(std::span<const RecordMeta> records, std::span<const Placement> placements) {
  std::set<SegmentFile*> synced;
  for (const Placement& p : placements) {
    if (!synced.insert(p.file.get()).second) continue;
    if (::fdatasync(p.file->fd.get()) != 0) {
      Status st = posix_error(errno, "fdatasync " + p.file->path);
      abort(placements);
      return st;
    }
  }
  std::lock_guard lock(mu_);
  std::vector<JournalEntry> entries;
  for (const RecordMeta& m : records) {
    if (!index_.contains(m.key)) entries.push_back({JournalOp::kAdd, m, 0});
  }
  for (const Placement& p : placements) --segments_.at(p.file->id).pins;
  KVTIER_TRY(append_locked(entries));
  for (const JournalEntry& e : entries) {
    index_add_locked(e.meta);
    Segment& seg = segments_.at(e.meta.segment);
    seg.saved_use = std::max(seg.saved_use, e.meta.sequence);  // an add records its write as a use
    sequence_ = std::max(sequence_, e.meta.sequence);
  }
  return maybe_checkpoint_locked();
}

Status Store::drop(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  return drop_locked(keys);
}

Status Store::drop_locked(std::span<const Key128> keys) {
  std::vector<JournalEntry> entries;
  for (const Key128& key : keys) {
    if (index_.contains(key)) entries.push_back({JournalOp::kDropRecord, RecordMeta{key}, 0});
  }
  KVTIER_TRY(append_locked(entries));
  std::set<uint32_t> touched;
  for (const JournalEntry& e : entries) {
    const RecordMeta meta = index_.at(e.meta.key);
    touched.insert(meta.segment);
    index_remove_locked(meta);
    ++evicted_records_;
  }
  for (uint32_t id : touched) {
    const Segment& seg = segments_.at(id);
    if (seg.records == 0 && seg.pins == 0 && id != active_) KVTIER_TRY(evict_segment_locked(id));
  }
  return maybe_checkpoint_locked();
}

Status Store::maybe_checkpoint_locked() {
  constexpr uint64_t kMinJournal = uint64_t{4} << 20;
  if (journal_->journal_bytes() < std::max<uint64_t>(kMinJournal, index_.size() * sizeof(RecordMeta))) {
    return {};
  }
  return checkpoint_locked();
}

Status Store::checkpoint_locked() {
  std::vector<SegmentUse> uses;
  uses.reserve(segments_.size());
  for (const auto& [id, seg] : segments_) uses.push_back({id, seg.last_use});
  KVTIER_TRY(journal_->checkpoint(live_records_locked(), uses));
  for (auto& [id, seg] : segments_) seg.saved_use = seg.last_use;
  unsaved_since_.reset();
  return {};
}

Status Store::append_locked(std::vector<JournalEntry> entries) {
  // Uses go first: a drop of the same segment later in the batch must win at replay.
  std::vector<JournalEntry> batch;
  for (const auto& [id, seg] : segments_) {
    if (seg.last_use > seg.saved_use) batch.push_back({JournalOp::kUse, {}, id, seg.last_use});
  }
  const size_t uses = batch.size();
  batch.insert(batch.end(), entries.begin(), entries.end());
  KVTIER_TRY(journal_->append(batch));
  for (size_t i = 0; i < uses; ++i) {
    if (auto it = segments_.find(batch[i].segment); it != segments_.end()) it->second.saved_use = batch[i].use;
  }
  unsaved_since_.reset();
  return {};
}

void Store::touch_locked(Segment& seg) {
  seg.last_use = ++sequence_;
  const auto now = std::chrono::steady_clock::now();
  if (!unsaved_since_) unsaved_since_ = now;
  if (now - *unsaved_since_ < kUseFlushInterval) return;
  // Recency is a hint: failing to record it must not fail the lookup that made it.
  Status st = append_locked({});
  if (!st.ok()) KVTIER_LOG(*log_, kWarn, "{}: recording segment uses: {}", dir_, st.to_string());
}

std::vector<RecordMeta> Store::live_records_locked() const {
  std::vector<RecordMeta> out;
  out.reserve(index_.size());
  for (const auto& [key, meta] : index_) out.push_back(meta);
  return out;
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
  std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.id < b.id; });
  return out;
}

void Store::fill_stats(Stats& stats) {
  std::lock_guard lock(mu_);
  stats.capacity_bytes = capacity_;
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
}

}  // namespace kvtier
