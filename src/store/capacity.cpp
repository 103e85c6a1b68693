// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/capacity.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kvtier/options.hpp"
#include "store/index_log.hpp"
#include "store/segment.hpp"

namespace kvtier {

Status CapacityBudget::resize(uint64_t capacity, uint64_t segment_bytes, uint64_t dir_bytes,
                              uint64_t journal_bytes, const std::string& dir) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  CapacityBudget next = *this;
  next.capacity_ = capacity;
  next.segment_bytes_ = segment_bytes;
  // The rank directory takes what it takes now or what its entries may need, whichever is more
  // (ext4 fits about 170 of its names in a block; 100 are counted, plus an htree index block). The
  // root may be shared by other ranks or not be kvtier's at all: one block is counted for it.
  const uint64_t names = capacity / segment_bytes + 8;
  const uint64_t dir_need = kBlock * (1 + names / 100 + (names >= 100 ? 1 : 0));
  // LOCK, MANIFEST.json, and either the manifest's temporary file (at creation) or the O_DIRECT
  // probe (at open): small files of a block each.
  next.fixed_bytes_ = 3 * kBlock + std::max(dir_bytes, dir_need) + kBlock;
  // The journal's budget is at least a thousandth of the capacity, between 64 KiB and 4 MiB.
  next.journal_floor_ =
      std::clamp<uint64_t>(capacity / 1024 / kBlock * kBlock, 64 * 1024, 4 * kMiB);
  next.segment_estimate_ = expected_disk_bytes(segment_bytes);
  const uint64_t least = next.segment_estimate_ + next.index_bytes(0, 1, journal_bytes);
  if (least > capacity) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("store {}: a capacity of {} cannot hold one {} segment and the "
                        "store's index files; it needs at least {}",
                        dir, size_text(capacity), size_text(segment_bytes), size_text(least))};
  }
  *this = next;
  return {};
}

bool CapacityBudget::note_segment(uint64_t disk_bytes) {
  if (disk_bytes <= segment_estimate_) return false;
  segment_estimate_ = disk_bytes;
  return true;
}

uint64_t CapacityBudget::journal_budget(uint64_t records, uint64_t segments) const {
  return std::max(journal_floor_, align_up(checkpoint_image_bytes(records, segments)));
}

uint64_t CapacityBudget::index_bytes(uint64_t records, uint64_t segments,
                                     uint64_t journal_bytes) const {
  const uint64_t next = align_up(checkpoint_image_bytes(records, segments));
  // The journal may still be longer than the budget an index that has since shrunk allows: it
  // is compacted at its next append, and counted as it is until then.
  const uint64_t journal = std::max({journal_floor_, next, align_up(journal_bytes)});
  // While a checkpoint is written its predecessor is still on disk: room for two of the larger.
  return fixed_bytes_ + journal + 2 * std::max(checkpoint_disk_, next);
}

uint64_t CapacityBudget::home_files(uint64_t journal_bytes) const {
  return fixed_bytes_ + checkpoint_disk_ + align_up(journal_bytes);
}

}  // namespace kvtier
