// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <unistd.h>

#include <cerrno>
#include <deque>

#include "io/io_engine.hpp"

namespace kvtier {
namespace {

/// pread/pwrite performed at enqueue time; completions are handed out by wait().
class PosixEngine final : public IoEngine {
 public:
  std::string_view name() const override { return "pread/pwrite"; }
  uint32_t depth() const override { return 1; }

  Status enqueue(const IoRequest& r) override {
    ssize_t n;
    do {
      n = r.write ? ::pwrite(r.fd, r.buffer, r.length, static_cast<off_t>(r.offset))
                  : ::pread(r.fd, r.buffer, r.length, static_cast<off_t>(r.offset));
    } while (n < 0 && errno == EINTR);
    done_.push_back({r.tag, n < 0 ? -static_cast<int64_t>(errno) : n});
    return {};
  }

  Status submit() override { return {}; }

  Result<size_t> wait(std::span<IoCompletion> out) override {
    if (done_.empty()) return fail(ErrorCode::kInternal, "wait() with nothing in flight");
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }

 private:
  std::deque<IoCompletion> done_;
};

}  // namespace

std::unique_ptr<IoEngine> make_posix_engine() { return std::make_unique<PosixEngine>(); }

}  // namespace kvtier
