// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Emulated drives for tests of kvtier's read probe and tuning: the real reads run, and each
// completion is held back until a model of the drive says it would have finished. A model with
// several channels rewards requests in flight (as NVMe does); one channel that loses time switching
// between waiting requests punishes them.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "io/io_engine.hpp"

namespace kvtier::testing {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

struct DriveModel {
  unsigned channels = 1;     ///< requests served at once
  double overhead_s = 0;     ///< fixed cost of a request
  double bytes_per_s = 1e9;  ///< one channel's rate
  double switch_s = 0;       ///< a lone channel's extra cost per other request waiting
  int64_t fail_at = -1;      ///< the request (counted over the engine's life) that gets EIO
};

/// Wraps a real engine; completions come back no earlier than the model allows.
class ModelledEngine final : public IoEngine {
 public:
  ModelledEngine(std::unique_ptr<IoEngine> inner, DriveModel model)
      : inner_(std::move(inner)), model_(model), free_at_(model.channels, Clock::now()) {}
  std::string_view name() const override { return inner_->name(); }
  uint32_t depth() const override { return inner_->depth(); }
  size_t most_held() const override { return inner_->most_held(); }
  Status enqueue(const IoRequest& r) override {
    const auto now = Clock::now();
    auto lane = std::min_element(free_at_.begin(), free_at_.end());
    const double waiting = model_.channels == 1 ? static_cast<double>(due_.size()) : 0.0;
    const double service =
        model_.overhead_s + r.length / model_.bytes_per_s + model_.switch_s * waiting;
    *lane = std::max(*lane, now) + std::chrono::duration_cast<Clock::duration>(Seconds(service));
    due_[r.tag] = *lane;
    if (calls_++ == model_.fail_at) {
      failed_.push_back({r.tag, -EIO});
      return {};
    }
    ++inner_flight_;
    return inner_->enqueue(r);
  }
  Status submit() override { return inner_flight_ > 0 ? inner_->submit() : Status{}; }
  // A wake reaches the inner engine's wait only: one that comes while this engine sleeps until a
  // modelled completion is due takes effect at that completion.
  void wake() override { inner_->wake(); }
  Result<size_t> wait(std::span<IoCompletion> out) override {
    if (ready_.empty() && failed_.empty()) {
      std::vector<IoCompletion> got(inner_flight_);
      auto n = inner_->wait(got);
      if (!n) return n;
      inner_flight_ -= *n;
      ready_.insert(ready_.end(), got.begin(), got.begin() + static_cast<long>(*n));
      std::sort(ready_.begin(), ready_.end(),
                [&](auto& a, auto& b) { return due_[a.tag] < due_[b.tag]; });
      if (ready_.empty()) return size_t{0};  // woken, nothing completed
    }
    std::deque<IoCompletion>& from = failed_.empty() ? ready_ : failed_;
    std::this_thread::sleep_until(due_[from.front().tag]);
    size_t n = 0;
    while (n < out.size() && !from.empty() && due_[from.front().tag] <= Clock::now()) {
      due_.erase(from.front().tag);
      out[n++] = from.front();
      from.pop_front();
    }
    return n;
  }

 private:
  std::unique_ptr<IoEngine> inner_;
  DriveModel model_;
  std::vector<Clock::time_point> free_at_;
  std::map<uint64_t, Clock::time_point> due_;
  std::deque<IoCompletion> ready_, failed_;
  size_t inner_flight_ = 0;
  int64_t calls_ = 0;
};

/// A drive that rewards requests in flight, as NVMe does: sixteen channels.
inline DriveModel rewards_depth() {
  return {.channels = 16, .overhead_s = 2e-3, .bytes_per_s = 50e6, .switch_s = 0};
}

/// A drive that punishes them: one channel losing 8 ms per other request waiting, which roughly
/// doubles a 1 MiB request's cost at depth 2. The penalty must stay large next to the real reads
/// the model wraps: those overlap at depth, and on a disk busy with other tests (a 1 MiB O_DIRECT
/// read then takes milliseconds) a small penalty was outweighed and depth 2 won.
inline DriveModel punishes_depth() {
  return {.channels = 1, .overhead_s = 1e-3, .bytes_per_s = 100e6, .switch_s = 8e-3};
}

class ModelScope {
 public:
  explicit ModelScope(DriveModel model) {
    set_io_engine_wrapper_for_testing([model](std::unique_ptr<IoEngine> inner) {
      return std::unique_ptr<IoEngine>(new ModelledEngine(std::move(inner), model));
    });
  }
  ~ModelScope() { set_io_engine_wrapper_for_testing({}); }
};

}  // namespace kvtier::testing
