// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/segment_table.hpp"

namespace kvtier {

const SegmentState* SegmentTable::least_recently_used(
    const std::function<bool(const SegmentState&)>& eligible) const {
  const SegmentState* victim = nullptr;
  for (const auto& [id, seg] : segments_) {
    if (seg.pins > 0 || !eligible(seg)) continue;
    if (victim == nullptr || seg.last_use < victim->last_use) victim = &seg;
  }
  return victim;
}

uint64_t SegmentTable::disk_bytes_on(uint32_t drive) const {
  uint64_t bytes = 0;
  for (const auto& [id, seg] : segments_) bytes += seg.drive == drive ? seg.disk_bytes : 0;
  return bytes;
}

uint64_t SegmentTable::evictable_bytes_on(uint32_t drive) const {
  uint64_t bytes = 0;
  for (const auto& [id, seg] : segments_) {
    bytes += seg.drive == drive && seg.pins == 0 ? seg.disk_bytes : 0;
  }
  return bytes;
}

uint64_t SegmentTable::live_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [id, seg] : segments_) bytes += seg.live_bytes;
  return bytes;
}

std::vector<SegmentUse> SegmentTable::uses() const {
  std::vector<SegmentUse> out;
  out.reserve(segments_.size());
  for (const auto& [id, seg] : segments_) out.push_back({id, seg.last_use});
  return out;
}

std::vector<JournalEntry> SegmentTable::unsaved_uses() const {
  std::vector<JournalEntry> out;
  for (const auto& [id, seg] : segments_) {
    if (seg.last_use > seg.saved_use) out.push_back({JournalOp::kUse, {}, id, seg.last_use});
  }
  return out;
}

void SegmentTable::uses_saved() {
  for (auto& [id, seg] : segments_) seg.saved_use = seg.last_use;
}

}  // namespace kvtier
