// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where new segments go: the drives that take them, a new segment's drive and file, and drives
// taken out of placement when one cannot be made or kept there.
#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "api/try.hpp"
#include "store/store.hpp"

namespace kvtier {
namespace {

// Whether a new segment refused with `st` says the drive is gone, read-only or failing, rather
// than that this process is short of something (descriptors, memory), which another drive would
// not cure.
bool drive_failure(const Status& st) {
  switch (st.code()) {
    case ErrorCode::kNotFound:
    case ErrorCode::kPermission:
      return true;
    case ErrorCode::kIo:
      return st.native_error() != EMFILE && st.native_error() != ENFILE &&
             st.native_error() != ENOMEM;
    default:
      return false;
  }
}

}  // namespace

uint64_t Store::writable_drives() const {
  if (drives_.size() <= 1) return 1;
  return static_cast<uint64_t>(std::count_if(
      drives_.begin(), drives_.end(), [](const Drive& d) { return d.takes_new_segments(); }));
}

Result<uint32_t> Store::drive_for_new_segment_locked() {
  if (drives_.size() <= 1) {
    KVTIER_TRY(enforce_capacity_locked(1, 0));
    return uint32_t{0};
  }
  // The ranks of one model share the drives: each starts its search at its own place in the list,
  // so that their segments, and a restore's reads by all ranks at once, spread over every drive
  // instead of all ranks filling the same first few.
  const KvGeometry& g = shape_.geometry;
  const uint64_t first =
      g.tp_world > 1 ? drives_.size() * (g.tp_rank % g.tp_world) / g.tp_world : 0;
  for (;;) {
    std::optional<uint32_t> best;
    uint64_t best_held = 0;
    // The drive with room holding the fewest segment bytes; of equal ones the first from this
    // rank's starting place. Segments only: counting the index files the home drive also holds
    // would put it last in every round, and a session of fewer segments than drives never on it.
    for (uint32_t i = 0; i < drives_.size(); ++i) {
      const auto d = static_cast<uint32_t>((first + i) % drives_.size());
      if (!drives_[d].takes_new_segments() || used_on_locked(d, 1, 1) > capacity_on(d)) continue;
      const uint64_t held = segments_.disk_bytes_on(d);
      if (!best || held < best_held) {
        best = d;
        best_held = held;
      }
    }
    if (best) return *best;
    // No drive has room: the store's least recently used segment on a drive taking new segments
    // goes, wherever that is, so the store as a whole keeps what was used last.
    const Segment* victim = lru_locked(std::nullopt);
    if (victim == nullptr || writable_drives() == 0) {
      return fail(
          ErrorCode::kCapacity,
          fmt::format(
              "store {} is full on all of its {} drives ({} writable): {} segments of {} bytes "
              "in use by writers, capacity {} bytes per drive",
              dir_, drives_.size(), writable_drives(), segments_.size(), budget_.segment_bytes(),
              budget_.capacity()));
    }
    KVTIER_TRY(evict_segment_locked(victim->file->id));
  }
}

Result<Store::Segment*> Store::new_segment_locked(uint64_t still_needed) {
  std::shared_ptr<SegmentFile> file;
  uint32_t drive = 0;
  while (!file) {
    KVTIER_ASSIGN_OR_RETURN(drive, drive_for_new_segment_locked());
    const uint32_t id = next_id_++;
    if (drives_.size() > 1) {
      // Recorded before the file exists: with a drive missing at a later open, the ids its
      // segments hold must not be handed out again (the index's highest id stays above them).
      const JournalEntry claim{JournalOp::kUse, {}, id, sequence_};
      KVTIER_TRY(append_locked(std::span(&claim, 1)));
    }
    auto made = create_segment(*fs_, drives_[drive].dir, id, budget_.segment_bytes(), direct_);
    if (made) {
      file = std::move(*made);
    } else if (made.error().code() == ErrorCode::kNoSpace) {
      // The file system holds less than the capacity says: the store keeps within what it holds
      // from now on, evicting as it does at capacity (or placing on other drives).
      KVTIER_TRY(learn_file_system_limit_locked(drive, made.error(), still_needed));
    } else if (drive != 0 && writable_drives() > 1 && drive_failure(made.error())) {
      take_out_of_placement_locked(
          drive, fmt::format("{}: a new segment cannot be made there ({})", drives_[drive].dir,
                             made.error().to_string()));
    } else {
      return fail(made.error());
    }
  }
  file->drive = drive;
  const uint32_t id = file->id;
  Segment& seg = segments_[id];
  seg.drive = drive;
  seg.file = std::move(file);
  seg.last_use = ++sequence_;
  active_ = id;
  ++seg.pins;  // not evictable while its size is checked
  Status measured = measure_segment_locked(seg);
  --seg.pins;
  KVTIER_TRY(measured);
  return &seg;
}

uint64_t Store::room_for_segments_locked() const {
  uint64_t room = 0;
  for (uint32_t d = 0; d < drives_.size(); ++d) {
    if (!drives_[d].takes_new_segments()) continue;
    const uint64_t kept = used_on_locked(d, 0, 0) - segments_.evictable_bytes_on(d);
    const uint64_t cap = capacity_on(d);
    if (cap > kept) room += (cap - kept) / budget_.segment_estimate();
  }
  return room;
}

Status Store::learn_file_system_limit_locked(uint32_t drive, const Status& why,
                                             uint64_t still_needed) {
  Drive& d = drives_[drive];
  const uint64_t free = fs_->free_bytes(d.dir).value_or(0);
  uint64_t held = segments_.disk_bytes_on(drive);
  if (drive == 0) {
    held += budget_.home_files(journal_ ? journal_->journal_bytes() : 0);
  }
  // It has just refused a segment: with what the store takes there now, one more does not fit
  // before room is made, whatever statvfs says (metadata, reserved blocks, other writers).
  const uint64_t limit =
      std::min(held + free, used_on_locked(drive, 0, 0) + budget_.segment_estimate() - 1);
  const bool first = d.fs_limit == 0;
  d.fs_limit = first ? limit : std::min(d.fs_limit, limit);
  if (first) {
    KVTIER_LOG(*log_, kWarn,
               "{}: its file system is full ({}) with {} bytes of this store on it, below the "
               "capacity of {} bytes: until the store reopens it takes at most {} bytes there, "
               "evicting the least recently used segments to stay within it (a capacity of at "
               "most {} bytes says so from the start)",
               d.dir, why.to_string(), held, budget_.capacity(), d.fs_limit, d.fs_limit);
  }
  const uint64_t room = room_for_segments_locked();
  if (room >= still_needed) return {};
  return {ErrorCode::kNoSpace,
          fmt::format(
              "the file system of {} is full: {} free beside the {} this store holds "
              "there, so it can take at most {} there, not its capacity of {}{}; this save "
              "needs {} more segments of {} and no eviction makes room for more than {} segments "
              "beside the segments saves are writing: lower the capacity (--capacity, "
              "Options::capacity_bytes) to at most {}, or free space on that file system ({})",
              d.dir, size_text(free), size_text(held), size_text(d.fs_limit),
              size_text(budget_.capacity()), drives_.size() > 1 ? " per drive" : "", still_needed,
              size_text(budget_.segment_bytes()), room, size_text(d.fs_limit), why.to_string()),
          why.native_error()};
}

void Store::take_out_of_placement_locked(uint32_t drive, std::string why) {
  if (drive == 0 || drive >= drives_.size() || !drives_[drive].unwritable.empty()) return;
  drives_[drive].unwritable = std::move(why);
  KVTIER_LOG(*log_, kWarn,
             "{}; it takes no new segments until the store reopens (its records "
             "are still read)",
             drives_[drive].unwritable);
  if (active_ != 0 && segments_.at(active_).drive == drive) active_ = 0;
}

Status Store::check_still_linked(const SegmentFile& file) {
  auto info = file.file->stat();
  if (!info || info->links > 0) return {};
  std::lock_guard lock(mu_);
  // Its records would be gone at the next open: the save is not acknowledged, and no later one
  // appends there.
  if (active_ == file.id) active_ = 0;
  take_out_of_placement_locked(
      file.drive, fmt::format("{}: its segment file {} was deleted while a save wrote it",
                              drives_[file.drive].dir, file.path));
  return {ErrorCode::kNotFound,
          fmt::format("segment file {} was deleted while this save wrote it (its drive removed "
                      "or wiped?); the save is not kept",
                      file.path)};
}

Status Store::measure_segment_locked(Segment& seg) {
  KVTIER_ASSIGN_OR_RETURN(FileInfo info, seg.file->file->stat());
  seg.disk_bytes = info.allocated;
  const uint64_t estimated = budget_.segment_estimate();
  if (!budget_.note_segment(seg.disk_bytes)) return {};
  // The file system spent more on it than estimated: expect as much of every new segment, and
  // make room for what this one took beyond the estimate now.
  KVTIER_LOG(*log_, kInfo, "{}: a segment takes {} bytes on disk, not the {} estimated", dir_,
             seg.disk_bytes, estimated);
  return enforce_capacity_locked(0);
}

uint64_t Store::offline_drives() const {
  return static_cast<uint64_t>(
      std::count_if(drives_.begin(), drives_.end(), [](const Drive& d) { return !d.available; }));
}

}  // namespace kvtier
