// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Streams a list of file pieces through a ring of staging slots with bounded bytes in flight.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
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

/// Where a pipeline's staging slots spent their time, in nanoseconds summed over the slots. What
/// is left of `total` the slots sat idle: before their first piece, after their last, or handed
/// to another operation.
struct SlotTimes {
  uint64_t total = 0;        ///< slots x the run's time
  uint64_t reading = 0;      ///< a request for the slot's piece in flight
  uint64_t queued = 0;       ///< read, waiting for a consumer thread
  uint64_t consuming = 0;    ///< in sink.consume() (reads) or sink.fill() (writes)
  uint64_t device_wait = 0;  ///< in sink.release(): the slot's asynchronous use (a GPU copy)
  uint64_t refill_wait = 0;  ///< handed back, waiting for the I/O thread to start its next piece

  SlotTimes& operator+=(const SlotTimes& o) {
    total += o.total;
    reading += o.reading;
    queued += o.queued;
    consuming += o.consuming;
    device_wait += o.device_wait;
    refill_wait += o.refill_wait;
    return *this;
  }
};

/// What a pipeline does with each piece's bytes.
class PieceSink {
 public:
  virtual ~PieceSink() = default;
  /// Writes: fill `data` (staging slot `slot`) with the bytes of piece `index` before it is
  /// written.
  [[nodiscard]] virtual Status fill(size_t /*index*/, size_t /*slot*/,
                                    std::span<std::byte> /*data*/) {
    return {};
  }
  /// Reads: piece `index` has arrived in `data` (held in staging slot `slot`).
  [[nodiscard]] virtual Status consume(size_t /*index*/, size_t /*slot*/,
                                       std::span<const std::byte> /*data*/) {
    return {};
  }
  /// Called before `slot` is reused: wait here for any asynchronous use of its bytes. May be called
  /// more than once for one use (a worker waits, then the slot's refill asks again): the later
  /// calls find nothing to wait for.
  [[nodiscard]] virtual Status release(size_t /*slot*/) { return {}; }
  /// Once a run is over (also after an error): where its slots' time went. Several pipelines may
  /// share a sink (one per drive) and call this at once.
  virtual void account(const SlotTimes& /*times*/) {}
};

class SlotYield;

/// Runs every piece through `engine`, one per slot in flight, retrying short transfers for the
/// remainder. Reads deliver each piece to sink.consume() as it completes (any order): inline on the
/// calling thread when `workers` is 0, else on that many worker threads, concurrently (the sink
/// must then be thread-safe across pieces). On the first error no new piece starts, in-flight ones
/// are drained, and that error is returned. With `yield`, a slot whose piece is done is handed back
/// (after sink.release()) instead of refilled whenever yield->should_yield(), keeping at least one.
/// Slots past engine.most_held() are used not at all (handed back at once, with `yield`).
[[nodiscard]] Status run_pipeline(IoEngine& engine, std::span<const Piece> pieces,
                                  std::span<const std::span<std::byte>> slots, bool write,
                                  PieceSink& sink, unsigned workers = 0,
                                  SlotYield* yield = nullptr);

/// Splits [offset, offset + length) of `fd` into pieces of at most `max_piece` bytes.
void split_into_pieces(int fd, uint64_t offset, uint64_t length, uint64_t max_piece,
                       std::vector<Piece>& out);

/// Lets a pipeline give staging slots back while it runs, when others wait for them.
class SlotYield {
 public:
  virtual ~SlotYield() = default;
  /// Whether the run should give up one of its slots now (others are waiting and it holds more
  /// than its share).
  [[nodiscard]] virtual bool should_yield() const = 0;
  /// Takes slot `slot` (an index into the run's slots) away from the run.
  virtual void yield(size_t slot) = 0;
};

/// @brief The engine's staging memory: fixed slots shared by concurrent operations. The admission
/// control of the engine: total staging (and so the bytes in flight) never exceeds the pool, an
/// operation starts once one slot is free, and a running operation hands slots back while others
/// wait until every operation holds an equal share (at least one).
class StagingPool {
 public:
  /// Owns total_bytes / slot_bytes page-aligned host slots (at least one).
  StagingPool(uint64_t total_bytes, uint64_t slot_bytes);
  /// The host memory such a pool owns: one slot at least, whatever `total_bytes` says.
  [[nodiscard]] static uint64_t bytes_for(uint64_t total_bytes, uint64_t slot_bytes);
  /// Shares memory it does not own (e.g. device buffers registered with cuFile): the same admission
  /// control over someone else's slots, each `slot_bytes` long. The memory must outlive the pool.
  StagingPool(std::vector<std::span<std::byte>> borrowed, uint64_t slot_bytes);

  /// Slots of one operation, returned to the pool on destruction (or earlier through yield()).
  class Lease final : public SlotYield {
   public:
    Lease(StagingPool* pool, std::vector<size_t> ids);
    Lease(Lease&&) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease() override;
    [[nodiscard]] std::span<const std::span<std::byte>> slots() const { return spans_; }
    [[nodiscard]] bool should_yield() const override;
    void yield(size_t slot) override;

   private:
    StagingPool* pool_;
    std::vector<size_t> ids_;  // pool ids, by slot index; kGone once yielded
    std::vector<std::span<std::byte>> spans_;
    size_t held_ = 0;
  };

  /// Waits until at least one slot is free, then takes up to `want` slots, at most an equal share
  /// among the operations running and waiting.
  [[nodiscard]] Lease acquire(size_t want);
  [[nodiscard]] uint64_t slot_bytes() const { return slot_bytes_; }
  [[nodiscard]] size_t slot_count() const { return slots_.size(); }
  /// The pool's bytes: the bound on bytes in flight through it.
  [[nodiscard]] uint64_t bytes() const { return slot_bytes_ * slots_.size(); }
  /// Every slot's memory, e.g. to pin it once.
  [[nodiscard]] std::vector<std::span<std::byte>> all_slots() const;

 private:
  void give_back(const std::vector<size_t>& ids, bool lease_ends);
  /// Slots one operation may hold now.
  [[nodiscard]] size_t fair_share() const;

  uint64_t slot_bytes_;
  std::vector<AlignedBuffer> owned_;
  std::vector<std::span<std::byte>> slots_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<size_t> free_;  // guarded by mu_
  std::atomic<size_t> waiting_{0};
  std::atomic<size_t> leases_{0};
};

/// Threads run_on_threads starts at most: each of cuFile's requests blocks one, and more requests
/// in flight than this gain a drive nothing while each thread costs a stack (a lease of 4 KiB
/// slots may hold tens of thousands).
inline constexpr size_t kMostTransferThreads = 64;

/// For synchronous I/O (cuFile): runs body(piece, slot) for every piece in [0, pieces) on one
/// thread per slot of `lease`, kMostTransferThreads at most, the slots beyond handed back to the
/// pool at once (parallel transfers come from parallel callers; bytes in flight stay bounded by
/// the slots). Before a slot is reused, or handed back, release(slot) waits for any
/// asynchronous use of its bytes. A thread gives its slot back to the pool when others wait for
/// slots and the lease holds more than its share, keeping at least one thread. On the first error
/// no new piece starts; that error is returned.
[[nodiscard]] Status run_on_threads(size_t pieces, StagingPool::Lease& lease,
                                    const std::function<Status(size_t slot)>& release,
                                    const std::function<Status(size_t piece, size_t slot)>& body);

}  // namespace kvtier
