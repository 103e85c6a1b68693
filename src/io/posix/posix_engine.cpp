// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "io/io_engine.hpp"

namespace kvtier {
namespace {

IoCompletion run(const IoRequest& r) {
  ssize_t n;
  do {
    n = r.write ? ::pwrite(r.fd, r.buffer, r.length, static_cast<off_t>(r.offset))
                : ::pread(r.fd, r.buffer, r.length, static_cast<off_t>(r.offset));
  } while (n < 0 && errno == EINTR);
  return {r.tag, n < 0 ? -static_cast<int64_t>(errno) : n};
}

/// pread/pwrite. With one thread, each request runs at enqueue time on the caller's thread. With
/// more, requests run on that many threads: a buffered read is a CPU copy out of the page cache,
/// and one copy stream, bound by one core's copy rate, cannot keep up with a GPU link or a fast
/// drive's readahead.
class PosixEngine final : public IoEngine {
 public:
  explicit PosixEngine(uint32_t threads) : threads_(std::max<uint32_t>(1, threads)) {
    if (threads_ == 1) return;
    for (uint32_t i = 0; i < threads_; ++i) workers_.emplace_back([this] { work(); });
  }
  ~PosixEngine() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    queued_.notify_all();
    for (auto& t : workers_) t.join();
  }

  std::string_view name() const override { return "pread/pwrite"; }
  uint32_t depth() const override { return threads_; }

  Status enqueue(const IoRequest& r) override {
    if (workers_.empty()) {
      done_.push_back(run(r));
      return {};
    }
    std::lock_guard lock(mu_);
    pending_.push_back(r);
    ++in_flight_;
    return {};
  }

  Status submit() override {
    queued_.notify_all();
    return {};
  }

  Result<size_t> wait(std::span<IoCompletion> out) override {
    std::unique_lock lock(mu_);
    if (done_.empty() && in_flight_ == 0)
      return fail(ErrorCode::kInternal, "wait() with nothing in flight");
    completed_.wait(lock, [&] { return !done_.empty() || woken_; });
    woken_ = false;
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }

  void wake() override {
    if (workers_.empty()) return;  // requests ran inside enqueue(): wait() never blocks
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    completed_.notify_all();
  }

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      queued_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (stop_) return;
      const IoRequest r = pending_.front();
      pending_.pop_front();
      lock.unlock();
      const IoCompletion c = run(r);
      lock.lock();
      done_.push_back(c);
      --in_flight_;
      completed_.notify_one();
    }
  }

  const uint32_t threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable queued_, completed_;
  std::deque<IoRequest> pending_;  // guarded by mu_
  std::deque<IoCompletion> done_;  // guarded by mu_ when there are workers
  size_t in_flight_ = 0;           // queued or running, guarded by mu_
  bool stop_ = false;
  bool woken_ = false;  // guarded by mu_: wake() since the last wait()
};

}  // namespace

std::unique_ptr<IoEngine> make_posix_engine(uint32_t threads) {
  return std::make_unique<PosixEngine>(threads);
}

}  // namespace kvtier
