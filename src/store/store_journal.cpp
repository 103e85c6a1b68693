// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's journal appends and checkpoints, and the segment uses they record.
#include <fmt/format.h>

#include "api/try.hpp"
#include "store/store.hpp"

namespace kvtier {
namespace {

// Uses are recorded in the journal along with the next write, at close, or by a lookup once the
// oldest unrecorded one is this old: at most one extra journal sync per interval for readers.
constexpr auto kUseFlushInterval = std::chrono::seconds(10);

}  // namespace

Status Store::checkpoint_locked() {
  // The drops this checkpoint forgets must stay done: a segment file whose unlink a power cut
  // undid would come back with records the index no longer names (found again by a rebuild). The
  // home's directory is synced by the checkpoint's own rename, before the journal is cut.
  for (size_t i = 1; i < drives_.size(); ++i) {
    Drive& d = drives_[i];
    if (!d.unsynced_removal) continue;
    if (Status synced = fs_->sync_dir(d.dir); !synced.ok()) {
      // A drive gone or failing: its files are misses either way, and the index keeps the highest
      // id handed out, so none is given to a new segment twice.
      KVTIER_LOG(*log_, kWarn, "{}: syncing {} after removing segments: {}", dir_, d.dir,
                 synced.to_string());
    }
    d.unsynced_removal = false;
  }
  std::vector<SegmentUse> uses = segments_.uses();
  // The highest id handed out is kept even once its segment is gone, so that no later open hands it
  // out again: an eviction's unlink that was not yet durable can come back after a power cut, and
  // beside a new segment of its id on another drive the store would not open.
  if (highest_id_gone_locked()) uses.push_back({next_id_ - 1, 0});
  const std::vector<RecordMeta> live = live_records_locked();
  KVTIER_TRY(journal_->checkpoint(live, uses));
  budget_.set_checkpoint_bytes(align_up(checkpoint_image_bytes(live.size(), uses.size())));
  segments_.uses_saved();
  unsaved_since_.reset();
  keep_highest_id_locked(0);
  return {};
}

bool Store::highest_id_gone_locked() const {
  return next_id_ > 1 && !segments_.contains(next_id_ - 1);
}

void Store::keep_highest_id_locked(uint32_t journal_names) {
  // A rebuild, which a damaged checkpoint calls for, reads the journal but not the checkpoint: the
  // journal names the highest id handed out too while its segment is gone.
  if (!highest_id_gone_locked() || journal_names >= next_id_ - 1) return;
  const JournalEntry floor{JournalOp::kUse, {}, next_id_ - 1, 0};
  if (Status kept = journal_->append(std::span(&floor, 1)); !kept.ok()) {
    // The checkpoint holds it: only a rebuild before the next open or checkpoint, which try
    // again, lacks it.
    KVTIER_LOG(*log_, kWarn, "{}: keeping the highest segment id ({}) in the journal: {}", dir_,
               next_id_ - 1, kept.to_string());
  }
}

Status Store::append_locked(std::span<const JournalEntry> entries,
                            const std::function<void(const JournalEntry&)>& apply) {
  if (!journal_) return directory_.refuse_read_only();
  // No batch fills more than half the budget, so one always fits once the journal is compacted.
  const uint64_t batch_limit = budget_.journal_floor() / 2;
  size_t next = 0;
  for (;;) {
    // Uses go first: a drop of the same segment later in the batch must win at replay.
    std::vector<JournalEntry> batch = segments_.unsaved_uses();
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

void Store::touch_locked(Segment& seg) {
  seg.last_use = ++sequence_;
  if (read_only()) return;  // recency is not worth a write the store may not make
  const auto now = std::chrono::steady_clock::now();
  if (!unsaved_since_) unsaved_since_ = now;
  if (now - *unsaved_since_ < kUseFlushInterval) return;
  // Recency is a hint: failing to record it must not fail the lookup that made it.
  Status st = append_locked({});
  if (!st.ok()) KVTIER_LOG(*log_, kWarn, "{}: recording segment uses: {}", dir_, st.to_string());
}

}  // namespace kvtier
