// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/tiers/cluster_arena.hpp"

#include <algorithm>

namespace kvtier {
namespace {

/// One lent slot; handed back to the arena when dropped.
struct Loan {
  std::weak_ptr<RemoteArena> arena;
  size_t slot = 0;
  ~Loan() {
    if (auto a = arena.lock()) a->give_back(slot);
  }
};

uint64_t page_up(uint64_t bytes) {
  return (bytes + AlignedBuffer::kAlignment - 1) / AlignedBuffer::kAlignment *
         AlignedBuffer::kAlignment;
}

}  // namespace

uint64_t RemoteArena::bytes_for(uint64_t value_bytes, uint64_t bound_bytes) {
  const uint64_t stride = page_up(value_bytes);
  return std::max<uint64_t>(1, bound_bytes / stride) * stride;
}

RemoteArena::RemoteArena(uint64_t value_bytes, uint64_t bound_bytes)
    : value_bytes_(value_bytes),
      stride_(page_up(value_bytes)),
      memory_(bytes_for(value_bytes, bound_bytes)) {
  for (size_t s = memory_.size() / stride_; s > 0; --s) free_.push_back(s - 1);
}

remote::ValueBuffer RemoteArena::lend(size_t len) {
  if (len > value_bytes_) return {};
  size_t slot = 0;
  {
    std::lock_guard lock(mu_);
    if (free_.empty()) return {};
    slot = free_.back();
    free_.pop_back();
  }
  auto loan = std::make_shared<Loan>();
  loan->arena = weak_from_this();
  loan->slot = slot;
  return {memory_.span().subspan(slot * stride_, len), std::move(loan)};
}

void RemoteArena::give_back(size_t slot) {
  std::lock_guard lock(mu_);
  free_.push_back(slot);
}

}  // namespace kvtier
