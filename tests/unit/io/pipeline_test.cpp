// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "io/pipeline.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/posix.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

/// An engine that really reads and writes, but can shorten, interrupt or fail requests.
class FaultyEngine final : public IoEngine {
 public:
  std::function<int64_t(const IoRequest&, int call)> fault;  // returns 0 for "no fault"
  std::function<bool(int call)> refuse;  // true: enqueue() fails, nothing queued
  size_t holds = SIZE_MAX;               // most_held()
  size_t most_seen = 0;                  // most requests it held at once
  std::string_view name() const override { return "faulty"; }
  uint32_t depth() const override { return 8; }
  size_t most_held() const override { return holds; }
  Status enqueue(const IoRequest& r) override {
    int call = calls_++;
    if (refuse && refuse(call)) return {ErrorCode::kIo, "the engine refused a request"};
    int64_t forced = fault ? fault(r, call) : 0;
    if (forced < 0) {
      done(r.tag, forced);
      return {};
    }
    uint32_t len =
        forced > 0 ? static_cast<uint32_t>(std::min<int64_t>(forced, r.length)) : r.length;
    ssize_t n = r.write ? ::pwrite(r.fd, r.buffer, len, static_cast<off_t>(r.offset))
                        : ::pread(r.fd, r.buffer, len, static_cast<off_t>(r.offset));
    done(r.tag, n < 0 ? -errno : n);
    return {};
  }
  Status submit() override { return {}; }
  Result<size_t> wait(std::span<IoCompletion> out) override {
    // Complete in reverse order to exercise out-of-order delivery.
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.back();
      done_.pop_back();
    }
    return n;
  }

 private:
  void done(uint64_t tag, int64_t result) {
    done_.push_back({tag, result});
    most_seen = std::max(most_seen, done_.size());
  }
  std::deque<IoCompletion> done_;
  int calls_ = 0;
};

/// Reads nothing; a request completes (whole) only when the test finishes it by its offset.
/// wait() blocks until one is finished or wake() is called: the pipeline's I/O thread is then
/// held in wait() exactly as long as the test keeps every request in flight.
class HeldEngine final : public IoEngine {
 public:
  std::string_view name() const override { return "held"; }
  uint32_t depth() const override { return 8; }
  Status enqueue(const IoRequest& r) override {
    std::lock_guard lock(mu_);
    pending_[r.offset] = {r.tag, r.length};
    changed_.notify_all();
    return {};
  }
  Status submit() override { return {}; }
  Result<size_t> wait(std::span<IoCompletion> out) override {
    std::unique_lock lock(mu_);
    waiting_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !done_.empty() || woken_; });
    waiting_ = false;
    woken_ = false;
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }
  void wake() override {
    std::lock_guard lock(mu_);
    woken_ = true;
    changed_.notify_all();
  }
  void finish(uint64_t offset) {
    std::lock_guard lock(mu_);
    auto it = pending_.find(offset);
    ASSERT_NE(it, pending_.end()) << "no request reads offset " << offset;
    done_.push_back(it->second);
    pending_.erase(it);
    changed_.notify_all();
  }
  /// Whether, within `limit`, a thread comes to block in wait() with nothing to return.
  bool blocked_in_wait(std::chrono::seconds limit) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return waiting_ && done_.empty() && !woken_; });
  }
  /// Whether, within `limit`, the requests in flight come to read exactly `offsets`.
  bool in_flight_become(const std::set<uint64_t>& offsets, std::chrono::seconds limit) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, limit, [&] {
      std::set<uint64_t> now;
      for (const auto& [offset, c] : pending_) now.insert(offset);
      return now == offsets;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<uint64_t, IoCompletion> pending_;  // by offset: tag, and the length as the result
  std::deque<IoCompletion> done_;
  bool woken_ = false;
  bool waiting_ = false;
};

class CollectSink final : public PieceSink {
 public:
  explicit CollectSink(std::vector<std::byte>& out, std::span<const Piece> pieces)
      : out_(out), pieces_(pieces) {}
  Status consume(size_t index, size_t, std::span<const std::byte> data) override {
    std::memcpy(out_.data() + pieces_[index].offset, data.data(), data.size());
    ++consumed;
    return {};
  }
  Status fill(size_t index, size_t, std::span<std::byte> data) override {
    std::memcpy(data.data(), out_.data() + pieces_[index].offset, data.size());
    return {};
  }
  std::atomic<int> consumed{0};  // workers consume at once

 private:
  std::vector<std::byte>& out_;
  std::span<const Piece> pieces_;
};

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_.resize(1 << 20);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = static_cast<std::byte>(i * 31 + 7);
    auto fd = open_file(dir_.str() + "/f", O_RDWR | O_CREAT);
    ASSERT_OK(fd);
    fd_ = std::move(*fd);
    ASSERT_OK(pwrite_full(fd_.get(), data_, 0));
    split_into_pieces(fd_.get(), 0, data_.size(), 64 << 10, pieces_);
    for (int i = 0; i < 3; ++i) slots_.emplace_back(64 << 10);
    for (auto& s : slots_) spans_.push_back(s.span());
  }
  testing::TempDir dir_;
  UniqueFd fd_;
  std::vector<std::byte> data_;
  std::vector<Piece> pieces_;
  std::vector<AlignedBuffer> slots_;
  std::vector<std::span<std::byte>> spans_;
};

TEST_F(PipelineTest, ReadsEveryPieceThroughFewerSlots) {
  std::vector<std::byte> got(data_.size());
  CollectSink sink(got, pieces_);
  FaultyEngine engine;
  ASSERT_OK(run_pipeline(engine, pieces_, spans_, false, sink));
  EXPECT_EQ(sink.consumed, 16);
  EXPECT_EQ(got, data_);
}

/// Records the slots a run hands back; never asks for more.
class RecordingYield final : public SlotYield {
 public:
  bool should_yield() const override { return false; }
  void yield(size_t slot) override { given.push_back(slot); }
  std::vector<size_t> given;
};

// An engine that holds fewer requests than the lease has slots (an io_uring's completion queue
// against a lease of tens of thousands of small slots) is never handed more; the slots it cannot
// hold go back to the pool, and every byte still arrives.
TEST_F(PipelineTest, SlotsBeyondWhatTheEngineHoldsAreHandedBackUnused) {
  for (size_t slots : {3u, 6u}) {
    std::vector<AlignedBuffer> memory;
    std::vector<std::span<std::byte>> spans;
    for (size_t i = 0; i < slots; ++i) spans.push_back(memory.emplace_back(64 << 10).span());
    for (size_t holds : {1u, 2u, 5u, 9u}) {
      SCOPED_TRACE(fmt::format("{} slots, the engine holds {}", slots, holds));
      std::vector<std::byte> got(data_.size());
      CollectSink sink(got, pieces_);
      FaultyEngine engine;
      engine.holds = holds;
      engine.fault = [](const IoRequest&, int call) -> int64_t {
        return call % 4 == 0 ? 8192 : 0;  // short reads, resumed in the same slot
      };
      RecordingYield yield;
      ASSERT_OK(run_pipeline(engine, pieces_, spans, false, sink, 2, &yield));
      EXPECT_EQ(got, data_);
      EXPECT_LE(engine.most_seen, std::min(holds, slots));
      std::vector<size_t> expected;
      for (size_t s = holds; s < slots; ++s) expected.push_back(s);
      EXPECT_EQ(yield.given, expected);
    }
  }
}

TEST_F(PipelineTest, ShortTransfersAndEintrAreResumed) {
  std::vector<std::byte> got(data_.size());
  CollectSink sink(got, pieces_);
  FaultyEngine engine;
  engine.fault = [](const IoRequest&, int call) -> int64_t {
    if (call % 3 == 0) return 4096;  // short read
    if (call % 5 == 0) return -EINTR;
    return 0;
  };
  ASSERT_OK(run_pipeline(engine, pieces_, spans_, false, sink));
  EXPECT_EQ(got, data_);
}

TEST_F(PipelineTest, EioStopsThePipelineWithAnIoError) {
  std::vector<std::byte> got(data_.size());
  CollectSink sink(got, pieces_);
  FaultyEngine engine;
  engine.fault = [](const IoRequest& r, int) -> int64_t {
    return r.offset == (5 << 16) ? -EIO : 0;
  };
  Status st = run_pipeline(engine, pieces_, spans_, false, sink);
  EXPECT_EQ(st.code(), ErrorCode::kIo);
  EXPECT_EQ(st.native_error(), EIO);
  EXPECT_LT(sink.consumed, 16);
}

// A short read's remainder the engine refuses to queue is an error, not a request waited for
// forever.
TEST_F(PipelineTest, ARefusedResumeOfAShortReadIsAnErrorNotAHang) {
  std::vector<std::byte> got(data_.size());
  CollectSink sink(got, pieces_);
  FaultyEngine engine;
  engine.fault = [](const IoRequest&, int call) -> int64_t { return call == 0 ? 4096 : 0; };
  engine.refuse = [](int call) { return call == 3; };  // three slots started, then the resume
  std::atomic<bool> done{false};
  Status st;
  std::thread run([&] {
    st = run_pipeline(engine, pieces_, spans_, false, sink);
    done = true;
  });
  for (int i = 0; i < 1000 && !done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done) {
    // Stuck for good: say so and end here (the thread cannot be joined).
    std::fprintf(stderr, "run_pipeline still waits 10 s after its engine refused a request\n");
    std::_Exit(1);
  }
  run.join();
  EXPECT_EQ(st.code(), ErrorCode::kIo) << st.to_string();
}

TEST_F(PipelineTest, EnospcOnWriteIsNoSpace) {
  CollectSink sink(data_, pieces_);
  FaultyEngine engine;
  engine.fault = [](const IoRequest& r, int) -> int64_t {
    return r.offset >= (8 << 16) ? -ENOSPC : 0;
  };
  EXPECT_EQ(run_pipeline(engine, pieces_, spans_, true, sink).code(), ErrorCode::kNoSpace);
}

TEST_F(PipelineTest, ReadPastEndOfFileIsCorruptNotAHang) {
  std::vector<Piece> beyond;
  split_into_pieces(fd_.get(), data_.size() - 4096, 64 << 10, 64 << 10, beyond);
  std::vector<std::byte> got(data_.size() + (64 << 10));
  CollectSink sink(got, beyond);
  FaultyEngine engine;
  EXPECT_EQ(run_pipeline(engine, beyond, spans_, false, sink).code(), ErrorCode::kCorrupt);
}

/// Three 4 KiB pieces of no file through two slots, for an engine that holds requests until told
/// (HeldEngine).
struct ThreePiecesTwoSlots {
  static constexpr uint32_t kPiece = 4096;
  std::vector<Piece> pieces = {{-1, 0, kPiece}, {-1, kPiece, kPiece}, {-1, 2 * kPiece, kPiece}};
  std::vector<AlignedBuffer> bufs;
  std::vector<std::span<std::byte>> spans;
  std::vector<std::byte> got = std::vector<std::byte>(3 * kPiece);
  ThreePiecesTwoSlots() {
    for (int i = 0; i < 2; ++i) bufs.emplace_back(kPiece);
    for (AlignedBuffer& b : bufs) spans.push_back(b.span());
  }
};

// Two slots, one worker: when the first read completes and the worker hands its slot back, the
// slot reads the third piece at once, while the second read is still in flight. Before the
// worker woke the engine, the freed slot waited for the next completion, and a lane ran at
// about half the requests in flight its slots allow.
TEST(PipelineWake, ASlotAWorkerFreesReadsAgainWhileTheOtherReadIsStillInFlight) {
  ThreePiecesTwoSlots t;
  constexpr uint32_t kPiece = ThreePiecesTwoSlots::kPiece;
  const std::vector<Piece>& pieces = t.pieces;
  HeldEngine engine;
  // The first piece is consumed only once the I/O thread waits on the engine again: its slot is
  // then freed while that thread is blocked.
  class GatedSink final : public PieceSink {
   public:
    GatedSink(HeldEngine& e, std::vector<std::byte>& got, std::span<const Piece> pieces)
        : engine_(e), collect(got, pieces) {}
    Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
      if (index == 0) {
        EXPECT_TRUE(engine_.blocked_in_wait(std::chrono::seconds(20)));
      }
      return collect.consume(index, slot, data);
    }
    HeldEngine& engine_;
    CollectSink collect;
  } sink(engine, t.got, pieces);
  Status result;
  std::thread run([&] { result = run_pipeline(engine, pieces, t.spans, false, sink, 1); });
  const auto limit = std::chrono::seconds(20);
  ASSERT_TRUE(engine.in_flight_become({0, kPiece}, limit));
  engine.finish(0);
  EXPECT_TRUE(engine.in_flight_become({kPiece, 2 * kPiece}, limit))
      << "the freed slot waited for the other read to complete";
  engine.finish(kPiece);
  ASSERT_TRUE(engine.in_flight_become({2 * kPiece}, limit));
  engine.finish(2 * kPiece);
  run.join();
  ASSERT_OK(result);
  EXPECT_EQ(sink.collect.consumed, 3);
}

// Two slots, two workers: while a worker waits for the first slot's asynchronous use (a GPU copy
// a sink's release() waits for), the I/O thread goes on reaping: the second read completes and is
// consumed. Were the wait left to the I/O thread when it refills the slot, nothing would be reaped
// until the copy ended, and a lane's other reads would sit completed behind it.
TEST(PipelineWake, TheIoThreadReapsWhileASlotsDeviceWorkIsWaitedFor) {
  ThreePiecesTwoSlots t;
  constexpr uint32_t kPiece = ThreePiecesTwoSlots::kPiece;
  const std::vector<Piece>& pieces = t.pieces;
  HeldEngine engine;
  // Releasing the first piece's slot waits until the second piece has been consumed.
  class CopyingSink final : public PieceSink {
   public:
    CopyingSink(std::vector<std::byte>& got, std::span<const Piece> pieces)
        : collect(got, pieces) {}
    Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
      std::lock_guard lock(mu_);
      Status st = collect.consume(index, slot, data);
      if (index == 0) first_slot_ = slot;
      consumed_.insert(index);
      changed_.notify_all();
      return st;
    }
    Status release(size_t slot) override {
      std::unique_lock lock(mu_);
      if (slot != first_slot_ || !consumed_.contains(0) || waited_) return {};
      waited_ = true;
      changed_.notify_all();
      second_seen_while_waiting =
          changed_.wait_for(lock, std::chrono::seconds(5), [&] { return consumed_.contains(1); });
      return {};
    }
    /// Whether, within `limit`, some thread waits in release() for the first piece's slot.
    bool waiting_to_release(std::chrono::seconds limit) {
      std::unique_lock lock(mu_);
      return changed_.wait_for(lock, limit, [&] { return waited_; });
    }
    CollectSink collect;
    bool second_seen_while_waiting = false;

   private:
    std::mutex mu_;
    std::condition_variable changed_;
    std::set<size_t> consumed_;
    size_t first_slot_ = SIZE_MAX;
    bool waited_ = false;
  } sink(t.got, pieces);
  Status result;
  std::thread run([&] { result = run_pipeline(engine, pieces, t.spans, false, sink, 2); });
  const auto limit = std::chrono::seconds(20);
  ASSERT_TRUE(engine.in_flight_become({0, kPiece}, limit));
  engine.finish(0);
  ASSERT_TRUE(sink.waiting_to_release(limit));
  engine.finish(kPiece);
  ASSERT_TRUE(engine.in_flight_become({2 * kPiece}, limit));
  engine.finish(2 * kPiece);
  run.join();
  ASSERT_OK(result);
  EXPECT_TRUE(sink.second_seen_while_waiting)
      << "no completion was reaped while the first slot's device work was waited for";
  EXPECT_EQ(sink.collect.consumed, 3);
}

// Every state a slot passes through is timed: consume() and release() here take known times, and
// the run accounts at least that much to each, within the slots' total.
TEST_F(PipelineTest, SlotTimesAccountConsumingAndWaitingForTheDevice) {
  using std::chrono::milliseconds;
  class SlowSink final : public PieceSink {
   public:
    SlowSink(std::vector<std::byte>& got, std::span<const Piece> pieces, size_t slots)
        : collect(got, pieces), copying_(slots) {}
    Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
      std::this_thread::sleep_for(milliseconds(2));
      std::lock_guard lock(mu_);
      copying_[slot] = true;
      return collect.consume(index, slot, data);
    }
    Status release(size_t slot) override {
      {
        std::lock_guard lock(mu_);
        if (!copying_[slot]) return {};
        copying_[slot] = false;
      }
      std::this_thread::sleep_for(milliseconds(3));
      return {};
    }
    void account(const SlotTimes& t) override {
      std::lock_guard lock(mu_);
      times += t;
      ++runs;
    }
    CollectSink collect;
    SlotTimes times;
    int runs = 0;

   private:
    std::mutex mu_;
    std::vector<bool> copying_;
  };
  for (unsigned workers : {0u, 2u}) {
    SCOPED_TRACE(::testing::Message() << workers << " workers");
    std::vector<std::byte> got(data_.size());
    SlowSink sink(got, pieces_, spans_.size());
    FaultyEngine engine;
    ASSERT_OK(run_pipeline(engine, pieces_, spans_, false, sink, workers));
    EXPECT_EQ(got, data_);
    ASSERT_EQ(sink.runs, 1);
    const SlotTimes& t = sink.times;
    const uint64_t ms = 1'000'000;
    EXPECT_GE(t.consuming, 16 * 2 * ms);
    EXPECT_GE(t.device_wait, 16 * 3 * ms);
    EXPECT_GT(t.reading, 0u);
    EXPECT_GE(t.total, t.reading + t.queued + t.consuming + t.device_wait + t.refill_wait);
    // Three slots over at least 16 x 5 ms of work spread over them.
    EXPECT_GE(t.total, 16 * 5 * ms);
  }
}

// A read held in flight is time a slot spends reading.
TEST(PipelineSlotTimes, ARequestHeldInFlightIsTimeSpentReading) {
  constexpr uint32_t kPiece = 4096;
  const std::vector<Piece> pieces = {{-1, 0, kPiece}};
  AlignedBuffer buf(kPiece);
  const std::vector<std::span<std::byte>> spans = {buf.span()};
  class Timing final : public PieceSink {
   public:
    void account(const SlotTimes& t) override { times = t; }
    SlotTimes times;
  } sink;
  HeldEngine engine;
  Status result;
  std::thread run([&] { result = run_pipeline(engine, pieces, spans, false, sink, 1); });
  ASSERT_TRUE(engine.in_flight_become({0}, std::chrono::seconds(20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  engine.finish(0);
  run.join();
  ASSERT_OK(result);
  EXPECT_GE(sink.times.reading, 30'000'000u);
  EXPECT_GE(sink.times.total, sink.times.reading);
}

TEST(StagingPool, BoundsSlotsAndReturnsThemOnRelease) {
  StagingPool pool(4 << 20, 1 << 20);
  EXPECT_EQ(pool.slot_count(), 4u);
  {
    auto a = pool.acquire(3);
    EXPECT_EQ(a.slots().size(), 3u);
    auto b = pool.acquire(1);
    EXPECT_EQ(b.slots().size(), 1u);  // the one left: an operation never takes more than exists
    for (auto s : a.slots()) EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data()) % 4096, 0u);
  }
  EXPECT_EQ(pool.acquire(10).slots().size(), 4u);
}

TEST(StagingPool, RunningOperationsYieldDownToAnEqualShare) {
  StagingPool pool(8 << 20, 1 << 20);
  auto a = pool.acquire(100);
  ASSERT_EQ(a.slots().size(), 8u);  // alone: everything
  EXPECT_FALSE(a.should_yield());
  std::atomic<size_t> b_slots{0};
  std::thread b([&] {
    auto lease = pool.acquire(100);
    b_slots = lease.slots().size();
  });
  // a hands slots back one at a time (as its pieces finish) while b waits for its half.
  size_t yielded = 0;
  while (b_slots == 0) {
    if (a.should_yield()) a.yield(yielded++);
    std::this_thread::yield();
  }
  b.join();
  EXPECT_EQ(yielded, 4u);
  EXPECT_EQ(b_slots.load(), 4u);
  EXPECT_FALSE(a.should_yield());  // nobody waits now
}

TEST(StagingPool, ManyOperationsEachGetAtLeastOneSlotAndNeverMoreThanExist) {
  StagingPool pool(4 << 20, 1 << 20);
  std::atomic<int> held{0}, most{0}, done{0};
  std::vector<std::thread> ops;
  for (int i = 0; i < 12; ++i) {
    ops.emplace_back([&] {
      auto lease = pool.acquire(4);
      const int now = held += static_cast<int>(lease.slots().size());
      for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      held -= static_cast<int>(lease.slots().size());
      ++done;
    });
  }
  for (auto& t : ops) t.join();
  EXPECT_EQ(done.load(), 12);
  EXPECT_LE(most.load(), 4);
}

TEST(StagingPool, SharesBorrowedMemoryWithoutOwningIt) {
  std::vector<std::byte> memory(3 * 64);
  std::vector<std::span<std::byte>> slots;
  for (size_t i = 0; i < 3; ++i) slots.push_back(std::span(memory).subspan(i * 64, 64));
  StagingPool pool(slots, 64);
  EXPECT_EQ(pool.slot_count(), 3u);
  EXPECT_EQ(pool.slot_bytes(), 64u);
  auto lease = pool.acquire(5);
  ASSERT_EQ(lease.slots().size(), 3u);
  std::set<std::byte*> seen;
  for (auto s : lease.slots()) {
    EXPECT_EQ(s.size(), 64u);
    EXPECT_GE(s.data(), memory.data());
    EXPECT_LT(s.data(), memory.data() + memory.size());
    seen.insert(s.data());
  }
  EXPECT_EQ(seen.size(), 3u);  // three distinct slots of the borrowed memory
}

TEST(RunOnThreads, RunsEveryPieceOnceAndReleasesEverySlotItUsed) {
  StagingPool pool(4 << 20, 1 << 20);
  auto lease = pool.acquire(4);
  ASSERT_EQ(lease.slots().size(), 4u);
  std::vector<std::atomic<int>> runs(100);
  std::vector<std::atomic<int>> releases(4);
  std::atomic<int> concurrent{0}, most{0};
  Status st = run_on_threads(
      runs.size(), lease,
      [&](size_t slot) {
        ++releases[slot];
        return Status{};
      },
      [&](size_t piece, size_t slot) {
        EXPECT_LT(slot, 4u);
        const int now = ++concurrent;
        for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        --concurrent;
        ++runs[piece];
        return Status{};
      });
  ASSERT_TRUE(st.ok()) << st.to_string();
  for (auto& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_LE(most.load(), 4);  // bounded by the slots
  EXPECT_GT(most.load(), 1);  // and parallel
  int released = 0;
  for (auto& r : releases) released += r.load();
  EXPECT_EQ(released, 100 + 4);  // before each piece, and once more at the end of each thread
}

// A lease of more slots than run_on_threads starts threads for (4 KiB slots of a large staging):
// at most kMostTransferThreads pieces run at once, each once, on slots below that count, and the
// slots beyond go back to the pool while the run goes on.
TEST(RunOnThreads, ALeaseOfThousandsOfSlotsRunsOnABoundedNumberOfThreads) {
  const size_t slots = kMostTransferThreads * 40 + 7;
  std::vector<std::byte> memory(slots * 4096);
  std::vector<std::span<std::byte>> spans;
  for (size_t i = 0; i < slots; ++i) spans.push_back(std::span(memory).subspan(i * 4096, 4096));
  StagingPool pool(std::move(spans), 4096);
  auto lease = pool.acquire(slots);
  ASSERT_EQ(lease.slots().size(), slots);
  std::vector<std::atomic<int>> runs(slots * 2);
  std::atomic<size_t> active{0}, most{0}, highest_slot{0};
  std::atomic<size_t> free_meanwhile{0};
  Status st = run_on_threads(
      runs.size(), lease, [](size_t) { return Status{}; },
      [&](size_t piece, size_t slot) {
        const size_t now = ++active;
        for (size_t m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        for (size_t h = highest_slot.load();
             slot > h && !highest_slot.compare_exchange_weak(h, slot);) {
        }
        if (piece == runs.size() / 2) free_meanwhile = pool.acquire(1).slots().size();
        ++runs[piece];
        --active;
        return Status{};
      });
  ASSERT_OK(st);
  for (auto& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_LE(most.load(), kMostTransferThreads);
  EXPECT_LT(highest_slot.load(), kMostTransferThreads);
  EXPECT_EQ(free_meanwhile.load(), 1u);  // a slot the run had no thread for, handed back
}

TEST(RunOnThreads, TheFirstErrorStopsNewPiecesAndIsReturned) {
  StagingPool pool(2 << 20, 1 << 20);
  auto lease = pool.acquire(2);
  std::atomic<int> ran{0};
  Status st = run_on_threads(
      1000, lease, [](size_t) { return Status{}; },
      [&](size_t piece, size_t) {
        ++ran;
        return piece == 3 ? Status(ErrorCode::kIo, "piece 3 failed") : Status{};
      });
  EXPECT_EQ(st.code(), ErrorCode::kIo);
  EXPECT_NE(st.message().find("piece 3"), std::string::npos);
  EXPECT_LT(ran.load(), 20);  // stopped, not run to the end
}

TEST(RunOnThreads, HandsSlotsBackToAWaitingOperationAndStillFinishes) {
  StagingPool pool(8 << 20, 1 << 20);
  auto a = pool.acquire(8);
  ASSERT_EQ(a.slots().size(), 8u);
  std::atomic<size_t> b_slots{0};
  std::atomic<bool> b_started{false};
  std::thread b;
  std::vector<std::atomic<int>> runs(400);
  Status st = run_on_threads(
      runs.size(), a, [](size_t) { return Status{}; },
      [&](size_t piece, size_t) {
        if (piece == 10 && !b_started.exchange(true)) {
          b = std::thread([&] { b_slots = pool.acquire(8).slots().size(); });
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++runs[piece];
        return Status{};
      });
  ASSERT_TRUE(st.ok()) << st.to_string();
  b.join();
  for (auto& r : runs) EXPECT_EQ(r.load(), 1);  // no piece lost to a yield
  EXPECT_GE(b_slots.load(), 4u);                // b got its half while a ran
}

TEST(IoEngines, ThreadedPosixEngineMovesEveryPieceAndReportsErrors) {
  testing::TempDir dir;
  auto fd = open_file(dir.str() + "/t", O_RDWR | O_CREAT);
  ASSERT_OK(fd);
  std::vector<std::byte> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>((i * 7) ^ (i >> 9));
  std::vector<Piece> pieces;
  split_into_pieces(fd->get(), 0, data.size(), 32 << 10, pieces);  // 32 pieces through 4 slots
  std::vector<AlignedBuffer> bufs;
  std::vector<std::span<std::byte>> spans;
  for (int i = 0; i < 4; ++i) spans.push_back(bufs.emplace_back(32 << 10).span());
  auto engine = make_posix_engine(4);
  EXPECT_EQ(engine->depth(), 4u);
  CollectSink writer(data, pieces);
  ASSERT_OK(run_pipeline(*engine, pieces, spans, true, writer));
  std::vector<std::byte> got(data.size());
  CollectSink reader(got, pieces);
  ASSERT_OK(run_pipeline(*engine, pieces, spans, false, reader));  // CollectSink is not thread-safe
  EXPECT_EQ(got, data);
  // An error completes like any request: a bad descriptor is EBADF, reported by the pipeline.
  std::vector<Piece> bad = {{-1, 0, 4096}};
  EXPECT_FALSE(run_pipeline(*engine, bad, spans, false, reader).ok());
  IoCompletion out[1];
  EXPECT_FALSE(engine->wait(out).has_value());  // nothing in flight: an error, not a hang
}

TEST(IoEngines, UringAndPosixMoveTheSameBytes) {
  testing::TempDir dir;
  auto fd = open_file(dir.str() + "/g", O_RDWR | O_CREAT);
  ASSERT_OK(fd);
  std::vector<std::byte> data(256 << 10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i ^ 0x5a);
  std::vector<Piece> pieces;
  split_into_pieces(fd->get(), 0, data.size(), 64 << 10, pieces);
  std::vector<AlignedBuffer> bufs;
  std::vector<std::span<std::byte>> spans;
  for (int i = 0; i < 2; ++i) spans.push_back(bufs.emplace_back(64 << 10).span());
  std::string fallback;
  auto uring = make_io_engine(IoPath::kDirect, 2, fallback);
  CollectSink writer(data, pieces);
  ASSERT_OK(run_pipeline(*uring, pieces, spans, true, writer));
  std::vector<std::byte> got(data.size());
  CollectSink reader(got, pieces);
  auto posix = make_posix_engine();
  ASSERT_OK(run_pipeline(*posix, pieces, spans, false, reader));
  EXPECT_EQ(got, data);
  if (!fallback.empty()) GTEST_SKIP() << "io_uring unavailable here: " << fallback;
  EXPECT_EQ(uring->name(), "io_uring");
}

// A wait() with a read in flight that cannot complete (an empty pipe) returns, with no
// completion, when another thread wakes the engine; the read then completes as usual.
TEST(IoEngines, AUringWaitReturnsWhenWokenBeforeAnyCompletion) {
  auto engine = make_uring_engine(2);
  if (!engine) GTEST_SKIP() << "io_uring unavailable here: " << engine.error().message();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const UniqueFd in(fds[0]), out(fds[1]);
  std::byte buf[8];
  ASSERT_OK((*engine)->enqueue({in.get(), 0, buf, sizeof buf, false, 7}));
  ASSERT_OK((*engine)->submit());
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (*engine)->wake();
  });
  IoCompletion c[2];
  auto woken = (*engine)->wait(c);
  waker.join();
  ASSERT_OK(woken);
  EXPECT_EQ(*woken, 0u);
  ASSERT_EQ(::write(out.get(), "kvtier!", 8), 8);
  auto read = (*engine)->wait(c);
  ASSERT_OK(read);
  ASSERT_EQ(*read, 1u);
  EXPECT_EQ(c[0].tag, 7u);
  EXPECT_EQ(c[0].result, 8);
}

// A request queued and not submitted (a submit the kernel refused for a moment leaves it so) is
// handed over by the next wait(), even one that finds the wake-up poll already armed: a wait for a
// request the kernel never got would not end. (The waker only keeps a failing engine from
// hanging the test: the wait must return the read, not the wake.)
TEST(IoEngines, AUringWaitSubmitsWhatIsStillQueued) {
  auto engine = make_uring_engine(4);
  if (!engine) GTEST_SKIP() << "io_uring unavailable here: " << engine.error().message();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const UniqueFd in(fds[0]), out(fds[1]);
  ASSERT_EQ(::write(out.get(), "kvtier!", 8), 8);
  std::byte first[8], second[8];
  ASSERT_OK((*engine)->enqueue({in.get(), 0, first, sizeof first, false, 1}));
  ASSERT_OK((*engine)->submit());
  IoCompletion c[2];
  auto got = (*engine)->wait(c);  // arms the wake-up poll
  ASSERT_OK(got);
  ASSERT_EQ(*got, 1u);
  ASSERT_EQ(::write(out.get(), "second!", 8), 8);
  ASSERT_OK((*engine)->enqueue({in.get(), 0, second, sizeof second, false, 2}));
  std::atomic<bool> returned{false};
  std::thread waker([&] {
    for (int i = 0; i < 200 && !returned.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    (*engine)->wake();
  });
  got = (*engine)->wait(c);
  returned = true;
  waker.join();
  ASSERT_OK(got);
  ASSERT_EQ(*got, 1u) << "the wait returned only when woken: the queued read was never submitted";
  EXPECT_EQ(c[0].tag, 2u);
  EXPECT_EQ(c[0].result, 8);
  EXPECT_EQ(std::memcmp(second, "second!", 8), 0);
}

// A ring for more requests than the kernel gives one (a lease of 70,000 4 KiB slots) is one of
// the most it gives, not a refusal that sends the read to pread threads.
TEST(IoEngines, AUringDeeperThanTheKernelAllowsIsClampedNotRefused) {
  // A ring of the most entries must be had at all: before Linux 5.12 its memory counts against
  // RLIMIT_MEMLOCK.
  if (!make_uring_engine(32768)) GTEST_SKIP() << "no io_uring of 32,768 entries here";
  auto deep = make_uring_engine(70000);
  ASSERT_OK(deep);
  // It says what it got, and holds no more than its completion queue takes.
  EXPECT_LE((*deep)->depth(), 32768u);
  EXPECT_LE((*deep)->most_held(), 2 * size_t{(*deep)->depth()});
  EXPECT_LT((*deep)->most_held(), 70000u);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const UniqueFd in(fds[0]), out(fds[1]);
  ASSERT_EQ(::write(out.get(), "kvtier!", 8), 8);
  std::byte got[8];
  ASSERT_OK((*deep)->enqueue({in.get(), 0, got, sizeof got, false, 3}));
  ASSERT_OK((*deep)->submit());
  IoCompletion c[1];
  auto n = (*deep)->wait(c);
  ASSERT_OK(n);
  ASSERT_EQ(*n, 1u);
  EXPECT_EQ(c[0].result, 8);
}

TEST(IoEngines, UringWithFixedBuffersMovesTheSameBytesInsideAndOutsideThem) {
  testing::TempDir dir;
  auto fd = open_file(dir.str() + "/f", O_RDWR | O_CREAT);
  ASSERT_OK(fd);
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::byte> data(1 << 20);
  for (std::byte& b : data) b = static_cast<std::byte>(rng());
  std::vector<Piece> pieces;
  split_into_pieces(fd->get(), 0, data.size(), 48 << 10, pieces);  // not a power of two
  std::vector<AlignedBuffer> bufs;
  std::vector<std::span<std::byte>> spans;
  for (int i = 0; i < 3; ++i) spans.push_back(bufs.emplace_back(64 << 10).span());
  // Two of the three slots registered: requests into the third go as plain ones.
  const FixedBuffers fixed = std::span(spans).first(2);
  std::string fallback;
  auto writer_engine = make_io_engine(IoPath::kDirect, 3, fallback, fixed);
  if (!fallback.empty()) GTEST_SKIP() << "io_uring unavailable here: " << fallback;
  CollectSink writer(data, pieces);
  ASSERT_OK(run_pipeline(*writer_engine, pieces, spans, true, writer));
  std::vector<std::byte> got(data.size());
  CollectSink reader(got, pieces);
  auto reader_engine = make_io_engine(IoPath::kDirect, 3, fallback, fixed);
  ASSERT_OK(run_pipeline(*reader_engine, pieces, spans, false, reader));
  EXPECT_EQ(got, data);
  std::vector<std::byte> plain(data.size());
  CollectSink check(plain, pieces);
  auto posix = make_posix_engine();
  ASSERT_OK(run_pipeline(*posix, pieces, spans, false, check));
  EXPECT_EQ(plain, data);
  // Root, or a locked-memory limit of at least 128 KiB, lets the kernel register them.
  if (reader_engine->fixed_buffers() == 0) GTEST_SKIP() << "the kernel refused to register them";
  EXPECT_EQ(reader_engine->fixed_buffers(), 2u);
}

}  // namespace
}  // namespace kvtier
