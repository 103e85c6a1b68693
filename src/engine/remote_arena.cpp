// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/remote_arena.hpp"

namespace kvtier {
namespace {

/// Owns one lent buffer; hands it back to the arena (if it still exists) when dropped.
struct Loan {
  std::weak_ptr<RemoteArena> arena;
  AlignedBuffer buffer;
  ~Loan() {
    if (auto a = arena.lock()) a->give_back(std::move(buffer));
  }
};

}  // namespace

RemoteArena::RemoteArena(uint64_t value_bytes, uint64_t bound_bytes)
    : value_bytes_(value_bytes), bound_bytes_(bound_bytes) {}

remote::ValueBuffer RemoteArena::lend(size_t len) {
  if (len > value_bytes_) return {};
  AlignedBuffer buffer;
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      buffer = std::move(free_.back());
      free_.pop_back();
    } else if ((made_ + 1) * value_bytes_ <= bound_bytes_) {
      ++made_;
    } else {
      return {};
    }
  }
  if (buffer.size() == 0) buffer = AlignedBuffer(value_bytes_);
  auto loan = std::make_shared<Loan>();
  loan->arena = weak_from_this();
  loan->buffer = std::move(buffer);
  const std::span<std::byte> bytes = loan->buffer.span().first(len);
  return {bytes, std::move(loan)};
}

void RemoteArena::give_back(AlignedBuffer buffer) {
  std::lock_guard lock(mu_);
  free_.push_back(std::move(buffer));
}

}  // namespace kvtier
