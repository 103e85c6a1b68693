// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Store recovery at open: the index loaded (or rebuilt from segment headers), segments opened,
// records checked against their files.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "api/try.hpp"
#include "store/store.hpp"

namespace kvtier {

Status Store::load_index() {
  KVTIER_ASSIGN_OR_RETURN(LoadedIndex loaded, IndexLog::load(dir_, *fs_));
  if (auto checkpoint = fs_->stat(fmt::format("{}/{}", dir_, IndexLog::kCheckpointName))) {
    budget_.set_checkpoint_bytes(checkpoint->allocated);
  }
  std::vector<std::pair<uint32_t, uint32_t>> ids;  // (segment, drive), ascending
  KVTIER_TRY(list_all_segments(ids));
  // Every store has a checkpoint and a journal from its first open on: segment files without both
  // mean the index was lost (deleted, or a crash before the first checkpoint). Trusting what is
  // left would forget the records the missing file held, and delete their segments as empty.
  if (!loaded.needs_rebuild && !(loaded.checkpoint_found && loaded.journal_found) && !ids.empty()) {
    loaded.needs_rebuild = true;
    loaded.problem = fmt::format("index {} missing beside {} segment file(s)",
                                 loaded.checkpoint_found ? "journal" : "checkpoint", ids.size());
  }
  if (loaded.needs_rebuild) {
    // Rebuilt without a drive, the index would forget every record that drive holds.
    for (const Drive& d : drives_) {
      if (d.available) continue;
      return {ErrorCode::kNotFound,
              fmt::format(
                  "{}: {}, and the index must be rebuilt from segment headers, which needs every "
                  "drive: {}",
                  dir_, loaded.problem, d.problem)};
    }
    KVTIER_LOG(*log_, kWarn, "{}: {}; rebuilding the index from segment headers", dir_,
               loaded.problem);
    index_rebuilt_ = true;
    loaded.records.clear();
    for (auto [id, drive] : ids) {
      KVTIER_ASSIGN_OR_RETURN(auto seg,
                              open_segment(*fs_, drives_[drive].dir, id, direct_, read_only()));
      KVTIER_ASSIGN_OR_RETURN(auto found, scan_segment(*seg, record_shape()));
      loaded.records.insert(loaded.records.end(), found.begin(), found.end());
    }
  }
  // A torn tail is cut now; a damaged journal is kept whole until the checkpoint below replaces it,
  // so a crash in between rebuilds again instead of losing what the damaged part held. A read-only
  // store keeps both as they are and has no journal to append to.
  if (!read_only()) {
    auto journal = IndexLog::open(
        dir_, loaded.needs_rebuild ? loaded.journal_file_bytes : loaded.journal_valid_bytes, *fs_);
    if (!journal) return journal.error();
    journal_.emplace(std::move(*journal));
  }
  std::lock_guard lock(mu_);
  // Above every id the index names too: a segment whose drop is still in the journal may be gone
  // from disk, and a new segment under its id would lose its records when that drop is replayed.
  next_id_ = std::max(ids.empty() ? 0 : ids.back().first, loaded.max_segment_id) + 1;
  KVTIER_TRY(open_segments_locked(ids));
  KVTIER_TRY(
      adopt_records(std::move(loaded.records), loaded.dropped_segments, loaded.segment_uses));
  if (read_only()) {
    if (used_locked(0) > budget_.capacity()) {
      KVTIER_LOG(*log_, kWarn, "{}: over its capacity of {} bytes; a read-only open evicts nothing",
                 dir_, budget_.capacity());
    }
    return {};
  }
  // A journal past its budget (kept by an older build, or under a larger capacity) is compacted.
  bool changed = loaded.needs_rebuild || dropped_at_open_ > 0 || !loaded.checkpoint_found ||
                 journal_->journal_bytes() > journal_budget_locked();
  KVTIER_TRY(enforce_capacity_locked(0));
  if (changed) {
    KVTIER_TRY(checkpoint_locked());
  } else {
    keep_highest_id_locked(loaded.journal_max_segment_id);
  }
  return {};
}

Status Store::open_segments_locked(std::span<const std::pair<uint32_t, uint32_t>> ids) {
  for (auto [id, drive] : ids) {
    Drive& d = drives_[drive];
    const bool writable = !read_only() && d.unwritable.empty();
    auto opened = open_segment(*fs_, d.dir, id, direct_, !writable);
    if (!opened && writable && drive != 0 && write_refused(opened.error().native_error())) {
      // A segment file that may not be written (its mode or attributes, a read-only mount under
      // the drive's directory): read, and its drive takes no new segments.
      d.unwritable = fmt::format(
          "{}: {} ({}): its records are served, new segments go to the other "
          "drives",
          d.dir, opened.error().message(), std::strerror(opened.error().native_error()));
      KVTIER_LOG(*log_, kWarn, "{}", d.unwritable);
      opened = open_segment(*fs_, d.dir, id, direct_, /*read_only=*/true);
    }
    KVTIER_ASSIGN_OR_RETURN(auto file, std::move(opened));
    file->drive = drive;
    Segment& seg = segments_[id];
    seg.drive = drive;
    seg.file = std::move(file);
    KVTIER_ASSIGN_OR_RETURN(FileInfo info, seg.file->file->stat());
    seg.disk_bytes = info.allocated;
    budget_.note_segment(seg.disk_bytes);
  }
  return {};
}

Status Store::adopt_records(std::vector<RecordMeta> records, std::span<const uint32_t> dropped,
                            const std::unordered_map<uint32_t, uint64_t>& uses) {
  std::set<uint32_t> dropped_ids(dropped.begin(), dropped.end());
  // Oldest first, so a key stored twice keeps its newest copy.
  std::sort(records.begin(), records.end(),
            [](const RecordMeta& a, const RecordMeta& b) { return a.sequence < b.sequence; });
  const bool drive_missing =
      std::any_of(drives_.begin(), drives_.end(), [](const Drive& d) { return !d.available; });
  for (const RecordMeta& m : records) {
    auto it = segments_.find(m.segment);
    // With a drive missing, a segment not found may be on it: kept, a miss until the drive is back.
    if (it == segments_.end() && drive_missing && !dropped_ids.contains(m.segment)) {
      if (const RecordMeta* old = index_.find(m.key)) index_remove_locked(RecordMeta(*old));
      index_.add_offline(m);
      sequence_ = std::max(sequence_, m.sequence);
      continue;
    }
    bool ok = it != segments_.end() && !dropped_ids.contains(m.segment) && m.offset % kBlock == 0 &&
              m.end() <= it->second.file->size && m.token_count > 0 &&
              m.token_count <= shape_.geometry.chunk_tokens &&
              payload_size_fits(shape_, m.token_count, m.payload_bytes);
    if (!ok) {
      ++dropped_at_open_;
      // Beside a writer, a snapshot sees segments it evicted meanwhile: not news.
      if (read_only()) {
        KVTIER_LOG(*log_, kDebug, "{}: index entry for segment {} offset {}: its segment is gone",
                   dir_, m.segment, m.offset);
      } else {
        KVTIER_LOG(*log_, kWarn,
                   "{}: index entry for segment {} offset {} has no intact file; dropped", dir_,
                   m.segment, m.offset);
      }
      continue;
    }
    if (const RecordMeta* old = index_.find(m.key)) index_remove_locked(RecordMeta(*old));
    index_add_locked(m);
    sequence_ = std::max(sequence_, m.sequence);
  }
  recovered_records_ = index_.served();
  if (index_.offline_count() > 0) {
    KVTIER_LOG(*log_, kWarn,
               "{}: {} record(s) on segments of missing drives are misses until they are back",
               dir_, index_.offline_count());
  }
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (it->second.records > 0) {
      ++it;
      continue;
    }
    // An empty file is an unused active segment or one whose drop was journaled before a crash.
    if (!read_only()) remove_segment_file_locked(it->second);
    it = segments_.erase(it);
  }
  // A segment was last used at its newest record's write or its last recorded use, whichever came
  // later (index_add_locked took the first); a rebuilt index has no uses and falls back to writes.
  uint32_t newest = 0;
  for (auto& [id, seg] : segments_) {
    if (auto it = uses.find(id); it != uses.end()) {
      seg.last_use = std::max(seg.last_use, it->second);
    }
    seg.saved_use = seg.last_use;
    sequence_ = std::max(sequence_, seg.last_use);
    // Appends go on only where they may be written.
    if (drives_[seg.drive].takes_new_segments()) newest = std::max(newest, id);
  }
  active_ = newest;
  return {};
}

}  // namespace kvtier
