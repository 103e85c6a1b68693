// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/dram_tier.hpp"

#include <cstring>

namespace kvtier {

DramTier::DramTier(uint64_t capacity_bytes, uint64_t slab_bytes)
    : slab_bytes_(slab_bytes), arena_(capacity_bytes / slab_bytes * slab_bytes) {
  const uint32_t slabs = static_cast<uint32_t>(capacity_bytes / slab_bytes);
  pins_.assign(slabs, 0);
  owned_.assign(slabs, false);
  for (uint32_t s = slabs; s > 0; --s) free_.push_back(s - 1);
}

DramTier::Hit::Hit(Hit&& o) noexcept
    : tier_(std::exchange(o.tier_, nullptr)), slab_(o.slab_), payload_(o.payload_), checksum_(o.checksum_) {}

DramTier::Hit& DramTier::Hit::operator=(Hit&& o) noexcept {
  if (this != &o) {
    reset();
    tier_ = std::exchange(o.tier_, nullptr);
    slab_ = o.slab_;
    payload_ = o.payload_;
    checksum_ = o.checksum_;
  }
  return *this;
}

void DramTier::Hit::reset() noexcept {
  if (tier_ != nullptr) tier_->unpin(slab_);
  tier_ = nullptr;
}

void DramTier::unpin(uint32_t slab) {
  std::lock_guard lock(mu_);
  // A slab erased while it was being read goes back to the free list when the last reader is done.
  if (--pins_[slab] == 0 && !owned_[slab]) free_.push_back(slab);
}

DramTier::Hit DramTier::find(const Key128& key, uint64_t checksum) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return {};
  Entry& e = it->second;
  if (e.checksum != checksum) return {};
  lru_.splice(lru_.begin(), lru_, e.lru);
  ++pins_[e.slab];
  return Hit(this, e.slab, {arena_.data() + uint64_t{e.slab} * slab_bytes_, e.bytes}, e.checksum);
}

bool DramTier::take_slab_locked(uint32_t& slab) {
  if (!free_.empty()) {
    slab = free_.back();
    free_.pop_back();
    return true;
  }
  // Evicting hands the victim's slab straight to the new record (it stays owned).
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    auto victim = entries_.find(*it);
    if (pins_[victim->second.slab] != 0) continue;
    slab = victim->second.slab;
    lru_.erase(victim->second.lru);
    entries_.erase(victim);
    return true;
  }
  return false;
}

std::optional<DramTier::Reservation> DramTier::reserve() {
  std::lock_guard lock(mu_);
  uint32_t slab;
  if (pins_.empty() || !take_slab_locked(slab)) return std::nullopt;
  ++pins_[slab];  // nobody reads or evicts it while it fills
  owned_[slab] = true;
  return Reservation{slab, arena_.data() + uint64_t{slab} * slab_bytes_};
}

void DramTier::publish(const Reservation& r, const Key128& key, uint64_t bytes, uint64_t checksum) {
  std::lock_guard lock(mu_);
  --pins_[r.slab];
  if (entries_.contains(key)) {  // another save of the same record got there first
    owned_[r.slab] = false;
    if (pins_[r.slab] == 0) free_.push_back(r.slab);
    return;
  }
  lru_.push_front(key);
  entries_[key] = Entry{r.slab, bytes, checksum, lru_.begin()};
}

void DramTier::abandon(const Reservation& r) {
  std::lock_guard lock(mu_);
  owned_[r.slab] = false;
  if (--pins_[r.slab] == 0) free_.push_back(r.slab);
}

void DramTier::insert(const Key128& key, std::span<const std::byte> payload, uint64_t checksum) {
  if (payload.size() > slab_bytes_) return;
  auto r = reserve();
  if (!r) return;
  std::memcpy(r->data, payload.data(), payload.size());
  publish(*r, key, payload.size(), checksum);
}

void DramTier::erase(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  for (const Key128& key : keys) {
    auto it = entries_.find(key);
    if (it == entries_.end()) continue;
    // A pinned slab is being read: it returns to free_ when its last reader unpins it.
    owned_[it->second.slab] = false;
    if (pins_[it->second.slab] == 0) free_.push_back(it->second.slab);
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
}

uint64_t DramTier::entries() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace kvtier
