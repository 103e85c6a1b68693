// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "io/pipeline.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>

#include "api/try.hpp"
#include "common/posix.hpp"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

struct SlotState {
  size_t piece = 0;
  uint32_t done = 0;  // bytes already transferred (short transfers are resumed)
  // When the slot entered its present state (reading, queued, handed back); unset before its first
  // piece and once handed to another operation.
  std::optional<Clock::time_point> since;
};

uint64_t nanos(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

/// SlotTimes as the threads of one run add to it.
struct SlotClock {
  std::atomic<uint64_t> reading{0}, queued{0}, consuming{0}, device_wait{0}, refill_wait{0};

  /// Adds the time since `st.since` to `bucket` and restarts the slot's clock at `now`.
  static void spend(std::atomic<uint64_t>& bucket, SlotState& st, Clock::time_point now) {
    if (st.since) bucket.fetch_add(nanos(now - *st.since), std::memory_order_relaxed);
    st.since = now;
  }
  /// Runs `call`, adding its time to `bucket`.
  template <typename Call>
  static Status timed(std::atomic<uint64_t>& bucket, Call&& call) {
    const Clock::time_point t0 = Clock::now();
    Status st = call();
    bucket.fetch_add(nanos(Clock::now() - t0), std::memory_order_relaxed);
    return st;
  }
  [[nodiscard]] SlotTimes snapshot(uint64_t total) const {
    return {total,
            reading.load(),
            queued.load(),
            consuming.load(),
            device_wait.load(),
            refill_wait.load()};
  }
};

IoRequest request_for(const Piece& p, std::span<std::byte> slot, uint32_t done, bool write,
                      size_t tag) {
  return {p.fd, p.offset + done, slot.data() + done, p.length - done, write, tag};
}

/// One run of the pipeline. The calling thread owns the I/O engine (enqueue, submit, wait); read
/// pieces that arrive are consumed inline or by `workers` threads, which hand their slot back
/// through freed_ for the I/O thread to refill.
class PipelineRun {
 public:
  PipelineRun(IoEngine& engine, std::span<const Piece> pieces,
              std::span<const std::span<std::byte>> slots, bool write, PieceSink& sink,
              unsigned workers, SlotYield* yield)
      : engine_(engine),
        pieces_(pieces),
        slots_(slots),
        write_(write),
        sink_(sink),
        usable_(std::clamp<size_t>(engine.most_held(), 1, slots.size())),
        state_(slots.size()),
        completions_(slots.size()),
        // A worker holds a slot while it consumes it: more workers than slots would only wait.
        workers_(write ? 0 : static_cast<unsigned>(std::min<size_t>(workers, usable_))),
        yield_(yield),
        yielded_(slots.size(), false),
        active_slots_(usable_) {}

  Status run() {
    const Clock::time_point began = Clock::now();
    Status st = run_all();
    // The slots it could use: those handed back at the start are another run's.
    sink_.account(clock_.snapshot(nanos(Clock::now() - began) * usable_));
    return st;
  }

 private:
  Status run_all() {
    // Slots beyond what the engine holds would have requests it cannot take: they go to others.
    for (size_t s = usable_; s < slots_.size(); ++s) {
      if (yield_ != nullptr) yield_->yield(s);
      yielded_[s] = true;
    }
    for (unsigned w = 0; w < workers_; ++w) threads_.emplace_back([this] { worker_loop(); });
    for (size_t s = 0; s < usable_ && next_ < pieces_.size() && ok(); ++s) note(start(s));
    if (in_flight_ > 0) note(engine_.submit());
    Status broken = io_loop();
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    if (!broken.ok()) return broken;
    if (!error_.ok()) return error_;
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (yielded_[s]) continue;
      KVTIER_TRY(SlotClock::timed(clock_.device_wait, [&] { return sink_.release(s); }));
    }
    return {};
  }

  bool ok() {
    std::lock_guard lock(mu_);
    return error_.ok();
  }
  void note(Status st) {
    if (st.ok()) return;
    std::lock_guard lock(mu_);
    if (error_.ok()) error_ = std::move(st);
  }

  Status start(size_t slot) {
    const size_t index = next_++;
    SlotState& st = state_[slot];
    SlotClock::spend(clock_.refill_wait, st, Clock::now());
    KVTIER_TRY(SlotClock::timed(clock_.device_wait, [&] { return sink_.release(slot); }));
    st.piece = index;
    st.done = 0;
    std::span<std::byte> data = slots_[slot].first(pieces_[index].length);
    if (write_) {
      KVTIER_TRY(SlotClock::timed(clock_.consuming, [&] { return sink_.fill(index, slot, data); }));
    }
    KVTIER_TRY(engine_.enqueue(request_for(pieces_[index], data, 0, write_, slot)));
    st.since = Clock::now();
    ++in_flight_;
    return {};
  }

  // Runs until no request is in flight and no slot is being consumed. Returns a non-ok Status only
  // when the engine itself broke (then in-flight requests cannot be reaped).
  Status io_loop() {
    for (;;) {
      refill_freed_slots();
      if (in_flight_ > 0) {
        // A slot a worker frees now would wait for the next completion to be refilled: the
        // worker wakes the engine instead while this thread waits (or is about to).
        io_waiting_.store(true);
        bool freed;
        {
          std::lock_guard lock(mu_);
          freed = !freed_.empty();
        }
        if (freed) {
          io_waiting_.store(false);
          continue;
        }
        auto n = engine_.wait(completions_);
        io_waiting_.store(false);
        if (!n) return n.error();
        for (size_t i = 0; i < *n; ++i) on_completion(completions_[i]);
        if (in_flight_ > 0) note(engine_.submit());
        continue;
      }
      std::unique_lock lock(mu_);
      if (consuming_ == 0 && freed_.empty()) return {};
      cv_.wait(lock, [&] { return !freed_.empty(); });
    }
  }

  void refill_freed_slots() {
    std::vector<size_t> freed;
    {
      std::lock_guard lock(mu_);
      freed.swap(freed_);
    }
    bool started = false;
    for (size_t slot : freed) {
      if (next_ < pieces_.size() && ok()) {
        // Others wait for staging: hand this slot back once its device work is done.
        if (yield_ != nullptr && active_slots_ > 1 && yield_->should_yield()) {
          SlotClock::spend(clock_.refill_wait, state_[slot], Clock::now());
          state_[slot].since.reset();
          note(SlotClock::timed(clock_.device_wait, [&] { return sink_.release(slot); }));
          yield_->yield(slot);
          yielded_[slot] = true;
          --active_slots_;
          continue;
        }
        note(start(slot));
        started = true;
      }
    }
    if (started) note(engine_.submit());
  }

  void on_completion(const IoCompletion& c) {
    const size_t slot = c.tag;
    SlotState& st = state_[slot];
    const Piece& piece = pieces_[st.piece];
    --in_flight_;
    if (!ok()) return;
    if (c.result == -EINTR || c.result == -EAGAIN) return resume(slot);
    if (c.result < 0) {
      return note(posix_error(static_cast<int>(-c.result),
                              write_ ? "write of a store segment" : "read of a store segment"));
    }
    if (c.result == 0)
      return note({ErrorCode::kCorrupt, "segment file ends before a record does (short read)"});
    st.done += static_cast<uint32_t>(c.result);
    if (st.done < piece.length) return resume(slot);  // short transfer: go on from where it stopped
    SlotClock::spend(clock_.reading, st, Clock::now());
    if (write_) return hand_back(slot);
    if (workers_ == 0) {
      note(SlotClock::timed(clock_.consuming, [&] {
        return sink_.consume(st.piece, slot, slots_[slot].first(piece.length));
      }));
      st.since = Clock::now();
      return hand_back(slot);
    }
    {
      std::lock_guard lock(mu_);
      ready_.push_back(slot);
      ++consuming_;
    }
    cv_.notify_all();
  }

  void resume(size_t slot) {
    const SlotState& st = state_[slot];
    Status queued =
        engine_.enqueue(request_for(pieces_[st.piece], slots_[slot], st.done, write_, slot));
    // A request the engine refused completes never: counted in flight, it would be waited for.
    if (queued.ok()) ++in_flight_;
    note(std::move(queued));
  }

  void hand_back(size_t slot) {
    std::lock_guard lock(mu_);
    freed_.push_back(slot);
  }

  void worker_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !ready_.empty(); });
      if (ready_.empty()) return;
      const size_t slot = ready_.front();
      ready_.pop_front();
      const bool skip = !error_.ok();
      lock.unlock();
      // state_[slot] is stable: the I/O thread does not touch a slot until it comes back freed.
      SlotState& held = state_[slot];
      SlotClock::spend(clock_.queued, held, Clock::now());
      Status st = skip ? Status() : SlotClock::timed(clock_.consuming, [&] {
        return sink_.consume(held.piece, slot, slots_[slot].first(pieces_[held.piece].length));
      });
      // The slot's asynchronous use (a GPU copy) is waited for here, not by the I/O thread when it
      // refills the slot: blocked there, it would reap no completion and start no other slot.
      if (!skip && st.ok()) {
        st = SlotClock::timed(clock_.device_wait, [&] { return sink_.release(slot); });
      }
      held.since = Clock::now();
      lock.lock();
      if (!st.ok() && error_.ok()) error_ = std::move(st);
      freed_.push_back(slot);
      --consuming_;
      cv_.notify_all();
      // After the push: either the I/O thread, about to wait, finds the slot, or it has said it
      // waits and is woken (outside the lock: the wake is a system call).
      if (io_waiting_.load()) {
        lock.unlock();
        engine_.wake();
        lock.lock();
      }
    }
  }

  IoEngine& engine_;
  std::span<const Piece> pieces_;
  std::span<const std::span<std::byte>> slots_;
  const bool write_;
  PieceSink& sink_;
  const size_t usable_;  // slots the engine can hold requests for; those after are not used
  std::vector<SlotState> state_;           // I/O thread, or the worker holding the slot
  std::vector<IoCompletion> completions_;  // I/O thread only
  size_t next_ = 0;                        // I/O thread only
  size_t in_flight_ = 0;                   // I/O thread only
  const unsigned workers_;
  SlotYield* yield_;           // I/O thread only
  std::vector<bool> yielded_;  // I/O thread only
  size_t active_slots_;        // I/O thread only
  std::vector<std::thread> threads_;
  std::atomic<bool> io_waiting_{false};  // the I/O thread waits on the engine (or is about to)
  SlotClock clock_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> ready_;   // guarded by mu_: slots waiting for a worker
  std::vector<size_t> freed_;  // guarded by mu_: slots consumed, to be refilled
  size_t consuming_ = 0;       // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  Status error_;               // guarded by mu_: the first error
};

}  // namespace

Status run_pipeline(IoEngine& engine, std::span<const Piece> pieces,
                    std::span<const std::span<std::byte>> slots, bool write, PieceSink& sink,
                    unsigned workers, SlotYield* yield) {
  if (pieces.empty()) return {};
  if (slots.empty()) return {ErrorCode::kInternal, "pipeline without staging slots"};
  return PipelineRun(engine, pieces, slots, write, sink, workers, yield).run();
}

void split_into_pieces(int fd, uint64_t offset, uint64_t length, uint64_t max_piece,
                       std::vector<Piece>& out) {
  for (uint64_t done = 0; done < length; done += max_piece) {
    out.push_back({fd, offset + done, static_cast<uint32_t>(std::min(max_piece, length - done))});
  }
}

uint64_t StagingPool::bytes_for(uint64_t total_bytes, uint64_t slot_bytes) {
  return std::max<uint64_t>(1, total_bytes / slot_bytes) * slot_bytes;
}

StagingPool::StagingPool(uint64_t total_bytes, uint64_t slot_bytes) : slot_bytes_(slot_bytes) {
  const size_t count = bytes_for(total_bytes, slot_bytes) / slot_bytes;
  for (size_t i = 0; i < count; ++i) {
    owned_.emplace_back(slot_bytes);
    slots_.push_back(owned_.back().span());
    free_.push_back(i);
  }
}

StagingPool::StagingPool(std::vector<std::span<std::byte>> borrowed, uint64_t slot_bytes)
    : slot_bytes_(slot_bytes), slots_(std::move(borrowed)) {
  for (size_t i = 0; i < slots_.size(); ++i) free_.push_back(i);
}

std::vector<std::span<std::byte>> StagingPool::all_slots() const { return slots_; }

namespace {
constexpr size_t kGone = ~size_t{0};
}  // namespace

size_t StagingPool::fair_share() const {
  const size_t contenders = std::max<size_t>(1, leases_ + waiting_);
  return std::max<size_t>(1, slots_.size() / contenders);
}

StagingPool::Lease StagingPool::acquire(size_t want) {
  want = std::max<size_t>(want, 1);
  std::unique_lock lock(mu_);
  // Wait for a share, not just a slot: running operations hand slots back down to their share
  // while others wait (Lease::should_yield), so everyone running ends up with an equal part.
  ++waiting_;
  freed_.wait(lock, [&] { return !free_.empty() && free_.size() >= std::min(want, fair_share()); });
  const size_t share = fair_share();  // counts this operation (still waiting) and every other one
  --waiting_;
  size_t take = std::min({want, free_.size(), share});
  std::vector<size_t> ids(free_.end() - static_cast<ptrdiff_t>(take), free_.end());
  free_.resize(free_.size() - take);
  ++leases_;
  return Lease(this, std::move(ids));
}

void StagingPool::give_back(const std::vector<size_t>& ids, bool lease_ends) {
  {
    std::lock_guard lock(mu_);
    for (size_t id : ids) {
      if (id != kGone) free_.push_back(id);
    }
    if (lease_ends) --leases_;
  }
  freed_.notify_all();
}

StagingPool::Lease::Lease(StagingPool* pool, std::vector<size_t> ids)
    : pool_(pool), ids_(std::move(ids)), held_(ids_.size()) {
  for (size_t id : ids_) spans_.push_back(pool_->slots_[id]);
}

StagingPool::Lease::Lease(Lease&& o) noexcept
    : pool_(o.pool_), ids_(std::move(o.ids_)), spans_(std::move(o.spans_)), held_(o.held_) {
  o.ids_.clear();
  o.pool_ = nullptr;
}

StagingPool::Lease::~Lease() {
  if (pool_ != nullptr) pool_->give_back(ids_, /*lease_ends=*/true);
}

bool StagingPool::Lease::should_yield() const {
  return pool_ != nullptr && pool_->waiting_ > 0 && held_ > pool_->fair_share();
}

void StagingPool::Lease::yield(size_t slot) {
  if (pool_ == nullptr || slot >= ids_.size() || ids_[slot] == kGone) return;
  pool_->give_back({ids_[slot]}, /*lease_ends=*/false);
  ids_[slot] = kGone;
  --held_;
}

Status run_on_threads(size_t pieces, StagingPool::Lease& lease,
                      const std::function<Status(size_t slot)>& release,
                      const std::function<Status(size_t piece, size_t slot)>& body) {
  std::atomic<size_t> next{0};
  std::mutex mu;  // guards error, running and the lease's yields
  Status error;
  size_t running = lease.slots().size();
  auto note = [&](Status st) {
    std::lock_guard lock(mu);
    if (error.ok()) error = std::move(st);
    next = pieces;  // stop handing out pieces
  };
  // Whether this thread should stop and hand its slot back: others wait, the lease holds more than
  // its share, and another thread of this run goes on.
  auto leave = [&] {
    std::lock_guard lock(mu);
    if (running == 1 || !lease.should_yield()) return false;
    --running;
    return true;
  };
  auto worker = [&](size_t slot) {
    bool yielding = false;
    while (!yielding) {
      const size_t p = next++;
      if (p >= pieces) break;
      Status st = release(slot);
      if (st.ok()) st = body(p, slot);
      if (!st.ok()) return note(std::move(st));
      yielding = leave();
    }
    if (Status st = release(slot); !st.ok()) return note(std::move(st));
    if (yielding) {
      std::lock_guard lock(mu);
      lease.yield(slot);
    }
  };
  std::vector<std::thread> threads;
  {
    // Held while threads start: none decides to leave before `running` counts those that did.
    std::lock_guard lock(mu);
    const size_t want = std::min(lease.slots().size(), kMostTransferThreads);
    threads.reserve(want);
    for (size_t s = 0; s < want; ++s) {
      try {
        threads.emplace_back(worker, s);
      } catch (const std::system_error&) {
        break;  // no more threads to be had: those started do the work
      } catch (const std::bad_alloc&) {
        break;
      }
    }
    running = std::max<size_t>(1, threads.size());
    // Slots no thread holds go back to the pool at once.
    for (size_t s = running; s < lease.slots().size(); ++s) lease.yield(s);
  }
  if (threads.empty()) worker(0);
  for (auto& t : threads) t.join();
  return error;
}

}  // namespace kvtier
