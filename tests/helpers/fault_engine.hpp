// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Fault injection through the I/O engine interface: every engine the library makes while a
// FaultScope lives is wrapped, and a rule decides per request whether it passes through, fails,
// or transfers only a prefix (a short transfer, or with an error after it, a torn write).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <deque>
#include <functional>
#include <memory>

#include "io/io_engine.hpp"

namespace kvtier::testing {

/// What happens to one request.
struct Fault {
  bool inject = false;    ///< false: the real engine does it
  uint32_t transfer = 0;  ///< bytes really transferred first (pread/pwrite)
  int64_t result = 0;     ///< the completion's result: bytes (a short transfer) or -errno
  int64_t flip_at = -1;   ///< reads: a byte of the transferred prefix to invert (a corrupted read)
};

/// `call` counts the requests of all wrapped engines since the scope began.
using FaultRule = std::function<Fault(const IoRequest& request, uint64_t call)>;

class FaultyEngine final : public IoEngine {
 public:
  FaultyEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<FaultRule> rule,
               std::shared_ptr<std::atomic<uint64_t>> calls)
      : inner_(std::move(inner)), rule_(std::move(rule)), calls_(std::move(calls)) {}
  std::string_view name() const override { return inner_->name(); }
  uint32_t depth() const override { return inner_->depth(); }
  size_t most_held() const override { return inner_->most_held(); }
  Status enqueue(const IoRequest& r) override {
    const Fault f = (*rule_)(r, (*calls_)++);
    if (!f.inject) {
      ++in_flight_;
      return inner_->enqueue(r);
    }
    if (f.transfer > 0) {
      const ssize_t n = r.write ? ::pwrite(r.fd, r.buffer, f.transfer, static_cast<off_t>(r.offset))
                                : ::pread(r.fd, r.buffer, f.transfer, static_cast<off_t>(r.offset));
      if (!r.write && n > f.flip_at && f.flip_at >= 0) r.buffer[f.flip_at] = ~r.buffer[f.flip_at];
    }
    injected_.push_back({r.tag, f.result});
    return {};
  }
  Status submit() override { return in_flight_ > 0 ? inner_->submit() : Status{}; }
  void wake() override { inner_->wake(); }
  Result<size_t> wait(std::span<IoCompletion> out) override {
    if (!injected_.empty()) {
      size_t n = 0;
      while (n < out.size() && !injected_.empty()) {
        out[n++] = injected_.front();
        injected_.pop_front();
      }
      return n;
    }
    auto n = inner_->wait(out);
    if (n) in_flight_ -= *n;
    return n;
  }

 private:
  std::unique_ptr<IoEngine> inner_;
  std::shared_ptr<FaultRule> rule_;
  std::shared_ptr<std::atomic<uint64_t>> calls_;
  std::deque<IoCompletion> injected_;
  size_t in_flight_ = 0;
};

/// Injects faults into every engine made while it lives.
class FaultScope {
 public:
  explicit FaultScope(FaultRule rule)
      : rule_(std::make_shared<FaultRule>(std::move(rule))),
        calls_(std::make_shared<std::atomic<uint64_t>>(0)) {
    set_io_engine_wrapper_for_testing([rule = rule_, calls = calls_](std::unique_ptr<IoEngine> e) {
      return std::unique_ptr<IoEngine>(new FaultyEngine(std::move(e), rule, calls));
    });
  }
  ~FaultScope() { set_io_engine_wrapper_for_testing({}); }
  FaultScope(const FaultScope&) = delete;
  FaultScope& operator=(const FaultScope&) = delete;
  [[nodiscard]] uint64_t calls() const { return *calls_; }

 private:
  std::shared_ptr<FaultRule> rule_;
  std::shared_ptr<std::atomic<uint64_t>> calls_;
};

}  // namespace kvtier::testing
