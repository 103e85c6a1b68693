// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/dram_tier.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/posix.hpp"

namespace kvtier {
namespace {

/// One field of /proc/meminfo in bytes, e.g. "MemAvailable"; nullopt where it cannot be read.
std::optional<uint64_t> meminfo_bytes(std::string_view field) {
  auto text = read_file("/proc/meminfo");
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  for (std::string key; lines >> key;) {
    uint64_t kib = 0;
    if (!(lines >> kib)) return std::nullopt;
    lines.ignore(std::numeric_limits<std::streamsize>::max(), '\n');  // the "kB" unit
    if (key.size() == field.size() + 1 && key.starts_with(field) && key.back() == ':')
      return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::string binary_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

std::string host_memory_limits() {
  std::string out;
  for (const char* field : {"MemAvailable", "MemTotal"}) {
    auto v = meminfo_bytes(field);
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", field, v ? binary_bytes(*v) : "unknown");
  }
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    out += fmt::format(", RLIMIT_AS {}", binary_bytes(limit.rlim_cur));
  }
  return out;
}

Status check_host_memory(uint64_t bytes, std::string_view what) {
  const std::optional<uint64_t> available = meminfo_bytes("MemAvailable");
  if (!available || bytes <= *available) return {};
  return {ErrorCode::kNoSpace,
          fmt::format("{}: {} bytes ({}) of host memory asked for, more than is available ({})",
                      what, bytes, binary_bytes(bytes), host_memory_limits())};
}

Result<MappedMemory> MappedMemory::map(uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return fail(ErrorCode::kNoSpace, fmt::format("mmap of {} bytes", bytes), errno);
  return MappedMemory(static_cast<std::byte*>(p), bytes);
}

MappedMemory::MappedMemory(MappedMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

MappedMemory& MappedMemory::operator=(MappedMemory&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void MappedMemory::reset() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Result<std::unique_ptr<DramTier>> DramTier::create(uint64_t capacity_bytes, uint64_t slab_bytes) {
  if (slab_bytes == 0) return fail(ErrorCode::kInvalidArgument, "DRAM tier: slab size 0");
  const uint64_t slabs = capacity_bytes / slab_bytes;
  if (slabs == 0) return std::unique_ptr<DramTier>(new DramTier(MappedMemory(), slab_bytes));
  if (slabs > std::numeric_limits<uint32_t>::max()) {
    return fail(
        ErrorCode::kInvalidArgument,
        fmt::format("DRAM tier: {} slabs of {} bytes, more than 2^32-1", slabs, slab_bytes));
  }
  const uint64_t bytes = slabs * slab_bytes;
  // The engine pins the whole arena for the GPU, so it must fit at once. Checked as asked (the
  // arena is less by under a slab), so the refusal names the size the caller gave.
  KVTIER_TRY(check_host_memory(capacity_bytes, "DRAM tier"));
  auto arena = MappedMemory::map(bytes);
  if (!arena) {
    return fail(
        ErrorCode::kNoSpace,
        fmt::format("DRAM tier: {} bytes ({}) of host memory asked for: {} failed ({})", bytes,
                    binary_bytes(bytes), arena.error().message(), host_memory_limits()),
        arena.error().native_error());
  }
  return std::unique_ptr<DramTier>(new DramTier(std::move(*arena), slab_bytes));
}

DramTier::DramTier(MappedMemory arena, uint64_t slab_bytes)
    : slab_bytes_(slab_bytes), arena_(std::move(arena)) {
  const auto slabs = static_cast<uint32_t>(arena_.span().size() / slab_bytes);
  pins_.assign(slabs, 0);
  owned_.assign(slabs, false);
  for (uint32_t s = slabs; s > 0; --s) free_.push_back(s - 1);
}

DramTier::Hit::Hit(Hit&& o) noexcept
    : tier_(std::exchange(o.tier_, nullptr)),
      slab_(o.slab_),
      bytes_(o.bytes_),
      checksum_(o.checksum_) {}

DramTier::Hit& DramTier::Hit::operator=(Hit&& o) noexcept {
  if (this != &o) {
    reset();
    tier_ = std::exchange(o.tier_, nullptr);
    slab_ = o.slab_;
    bytes_ = o.bytes_;
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

void DramTier::insert(const Key128& key, std::span<const std::byte> bytes, uint64_t checksum) {
  if (bytes.size() > slab_bytes_) return;
  auto r = reserve();
  if (!r) return;
  std::memcpy(r->data, bytes.data(), bytes.size());
  publish(*r, key, bytes.size(), checksum);
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
