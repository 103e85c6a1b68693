// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The DRAM tier's store: record images (header block then payload) of recently saved records kept
// in (pinned) host memory in front of the drives (the tier itself: tiers/dram.cpp), so a hit
// restores with one copy to the device and no disk read. It keeps bytes under a key and checksum,
// whatever they are.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/keys.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// kNoSpace "<what>: N bytes (X GiB) of host memory asked for, more than is available (<limits>)"
/// when `bytes` exceed MemAvailable (ok where /proc/meminfo cannot be read): with overcommit the
/// kernel maps far more than exists, and memory that does not fit fails only when it is touched
/// or pinned (an OOM kill), so what cannot fit is refused up front.
[[nodiscard]] Status check_host_memory(uint64_t bytes, std::string_view what);

/// The limits an allocation of host memory runs into, for messages: "MemAvailable 20.1 GiB,
/// MemTotal 23.5 GiB", plus RLIMIT_AS where the process has one.
[[nodiscard]] std::string host_memory_limits();

/// "256.0 MiB", "23.5 GiB", "1.0 TiB".
[[nodiscard]] std::string binary_bytes(uint64_t bytes);

/// @brief Sole owner of an anonymous private mapping: page-aligned, zero-filled, backed by memory
/// only as it is touched. Not thread-safe.
class MappedMemory {
 public:
  MappedMemory() = default;
  /// Maps `bytes` (> 0); kNoSpace with mmap's errno when the kernel refuses.
  [[nodiscard]] static Result<MappedMemory> map(uint64_t bytes);
  MappedMemory(MappedMemory&& o) noexcept;
  MappedMemory& operator=(MappedMemory&& o) noexcept;
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;
  ~MappedMemory() { reset(); }
  void reset() noexcept;
  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::span<std::byte> span() const { return {data_, size_}; }

 private:
  MappedMemory(std::byte* data, uint64_t size) : data_(data), size_(size) {}
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

/// @brief Fixed-size slabs (one record image each: every full chunk weighs the same) carved from
/// one page-aligned arena, with LRU eviction. Thread-safe. Slabs handed out by find() are pinned
/// (never evicted or reused) until the Hit is destroyed.
class DramTier {
 public:
  /// A tier of capacity_bytes / slab_bytes slabs. kNoSpace, saying how much was asked, what
  /// failed and the limit, when the arena is more than the host's available memory (MemAvailable:
  /// the engine pins the whole arena for the GPU, so it must fit at once) or cannot be mapped.
  [[nodiscard]] static Result<std::unique_ptr<DramTier>> create(uint64_t capacity_bytes,
                                                                uint64_t slab_bytes);

  /// A record's bytes in the tier, held for the caller.
  class Hit {
   public:
    Hit() = default;
    Hit(DramTier* tier, uint32_t slab, std::span<const std::byte> bytes, uint64_t checksum)
        : tier_(tier), slab_(slab), bytes_(bytes), checksum_(checksum) {}
    Hit(Hit&& o) noexcept;
    Hit& operator=(Hit&& o) noexcept;
    Hit(const Hit&) = delete;
    Hit& operator=(const Hit&) = delete;
    ~Hit() { reset(); }
    void reset() noexcept;
    [[nodiscard]] explicit operator bool() const { return tier_ != nullptr; }
    [[nodiscard]] std::span<const std::byte> bytes() const { return bytes_; }
    [[nodiscard]] uint64_t checksum() const { return checksum_; }

   private:
    DramTier* tier_ = nullptr;
    uint32_t slab_ = 0;
    std::span<const std::byte> bytes_;
    uint64_t checksum_ = 0;
  };

  /// The record's bytes if the tier holds them with this checksum (a stale copy is dropped).
  [[nodiscard]] Hit find(const Key128& key, uint64_t checksum);
  /// A slab taken for a record being filled; invisible to find() until published.
  struct Reservation {
    uint32_t slab = 0;
    std::byte* data = nullptr;
  };
  /// Takes a free slab, or the least recently used unpinned one; nullopt when every slab is pinned.
  [[nodiscard]] std::optional<Reservation> reserve();
  /// Makes a filled reservation visible as `key`'s bytes (`bytes` long, with `checksum`).
  void publish(const Reservation& r, const Key128& key, uint64_t bytes, uint64_t checksum);
  /// Gives an unpublished reservation back.
  void abandon(const Reservation& r);
  /// reserve() + copy + publish(); a no-op when the bytes do not fit a slab or none is free.
  void insert(const Key128& key, std::span<const std::byte> bytes, uint64_t checksum);
  void erase(std::span<const Key128> keys);

  /// The arena, e.g. to pin it for DMA once.
  [[nodiscard]] std::span<std::byte> arena() const { return arena_.span(); }
  [[nodiscard]] uint64_t slab_bytes() const { return slab_bytes_; }
  [[nodiscard]] uint64_t entries() const;

 private:
  struct Entry {
    uint32_t slab;
    uint64_t bytes;
    uint64_t checksum;
    std::list<Key128>::iterator lru;  // position in lru_ (front = most recent)
  };
  DramTier(MappedMemory arena, uint64_t slab_bytes);
  void unpin(uint32_t slab);
  bool take_slab_locked(uint32_t& slab);

  uint64_t slab_bytes_;
  MappedMemory arena_;
  mutable std::mutex mu_;
  std::unordered_map<Key128, Entry, Key128Hash> entries_;  // guarded by mu_
  std::list<Key128> lru_;                                  // guarded by mu_
  std::vector<uint32_t> free_;                             // guarded by mu_
  std::vector<uint32_t> pins_;                             // guarded by mu_: readers per slab
  std::vector<bool> owned_;                                // guarded by mu_: slab holds an entry
};

}  // namespace kvtier
