// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Streams a list of file pieces through a ring of staging slots with bounded bytes in flight.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "io/io_engine.hpp"

namespace kvtier {

/// A contiguous range of one file, at most one staging slot long.
struct Piece {
  int fd = -1;
  uint64_t offset = 0;
  uint32_t length = 0;
};

/// What a pipeline does with each piece's bytes.
class PieceSink {
 public:
  virtual ~PieceSink() = default;
  /// Writes: fill `data` (staging slot `slot`) with the bytes of piece `index` before it is written.
  [[nodiscard]] virtual Status fill(size_t /*index*/, size_t /*slot*/, std::span<std::byte> /*data*/) {
    return {};
  }
  /// Reads: piece `index` has arrived in `data` (held in staging slot `slot`).
  [[nodiscard]] virtual Status consume(size_t /*index*/, size_t /*slot*/,
                                       std::span<const std::byte> /*data*/) {
    return {};
  }
  /// Called before `slot` is reused: wait here for any asynchronous use of its bytes.
  [[nodiscard]] virtual Status release(size_t /*slot*/) { return {}; }
};

/// Runs every piece through `engine`, one per slot in flight, retrying short transfers for the
/// remainder. Reads deliver each piece to sink.consume() as it completes (any order): inline on the
/// calling thread when `workers` is 0, else on that many worker threads, concurrently (the sink must
/// then be thread-safe across pieces). On the first error no new piece starts, in-flight ones are
/// drained, and that error is returned.
[[nodiscard]] Status run_pipeline(IoEngine& engine, std::span<const Piece> pieces,
                                  std::span<const std::span<std::byte>> slots, bool write,
                                  PieceSink& sink, unsigned workers = 0);

/// Splits [offset, offset + length) of `fd` into pieces of at most `max_piece` bytes.
void split_into_pieces(int fd, uint64_t offset, uint64_t length, uint64_t max_piece,
                       std::vector<Piece>& out);

/// @brief Page-aligned staging memory of fixed size, handed out as slots: the per-engine bound on
/// bytes in flight. Thread-safe.
class StagingPool {
 public:
  StagingPool(uint64_t total_bytes, uint64_t slot_bytes);

  /// Slots of one operation, returned to the pool on destruction.
  class Lease {
   public:
    Lease(StagingPool* pool, std::vector<size_t> ids);
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    [[nodiscard]] std::span<const std::span<std::byte>> slots() const { return spans_; }

   private:
    StagingPool* pool_;
    std::vector<size_t> ids_;
    std::vector<std::span<std::byte>> spans_;
  };

  /// Waits until at least one slot is free, then takes up to `want` slots.
  [[nodiscard]] Lease acquire(size_t want);
  [[nodiscard]] uint64_t slot_bytes() const { return slot_bytes_; }
  [[nodiscard]] size_t slot_count() const { return buffers_.size(); }
  /// Every slot's memory, e.g. to pin it once.
  [[nodiscard]] std::vector<std::span<std::byte>> all_slots() const;

 private:
  void give_back(const std::vector<size_t>& ids);

  uint64_t slot_bytes_;
  std::vector<AlignedBuffer> buffers_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<size_t> free_;  // guarded by mu_
};

}  // namespace kvtier
