// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/posix.hpp"
#include "io/io_engine.hpp"

namespace kvtier {
namespace {

/// The tag of the wake-up poll's completions: no request's (requests carry slot indices).
constexpr uint64_t kWakeTag = ~uint64_t{0};

/// io_uring_enter's refusals that pass: no memory for a request now (EAGAIN), completions to be
/// reaped first (EBUSY).
bool transient(int rc) { return rc == -EAGAIN || rc == -EBUSY; }

/// A wait() refused this many times in a row, a millisecond apart, is an error.
constexpr int kRefusalsBeforeError = 5000;

/// One io_uring per engine; requests go in as read/write SQEs (O_DIRECT comes from the fd), as
/// fixed-buffer ones where the buffer lies in a registered region. wake() writes an eventfd that
/// the ring polls, so a wait() returns without a request's completion.
class UringEngine final : public IoEngine {
 public:
  explicit UringEngine(uint32_t depth) : depth_(depth) {}
  ~UringEngine() override {
    if (ready_) io_uring_queue_exit(&ring_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }
  UringEngine(const UringEngine&) = delete;
  UringEngine& operator=(const UringEngine&) = delete;

  Status init() {
    // The wake-up poll needs no entry of its own: wait() arms it after the requests were submitted.
    // Clamped to the kernel's most entries (32,768): a lease of more slots (4 KiB requests over a
    // large staging) would otherwise be refused a ring and run on pread threads. enqueue()
    // submits when the queue is full. Kernels before 5.6 know no clamp: there a ring of at most
    // 4,096 entries.
    int rc = io_uring_queue_init(depth_, &ring_, IORING_SETUP_CLAMP);
    if (rc == -EINVAL) rc = io_uring_queue_init(std::min<uint32_t>(depth_, 4096), &ring_, 0);
    if (rc < 0) return Status(ErrorCode::kNotSupported, "io_uring_queue_init failed", -rc);
    ready_ = true;
    depth_ = std::min(depth_, ring_.sq.ring_entries);  // the kernel rounds up, and clamps
    // One completion entry stays free for the wake-up poll.
    most_held_ = std::max<size_t>(1, ring_.cq.ring_entries - 1);
    // Without an eventfd the engine still works; its wait() only returns at completions.
    // Armed at the first wait(), not here: before Linux 5.13 registering buffers waits for the
    // ring to go idle, and a pending poll would keep it busy for ever.
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return {};
  }

  /// Registers `fixed`; a refusal (RLIMIT_MEMLOCK for an unprivileged process, an old kernel) is
  /// no error: requests then pin their pages each time, as without registration.
  void register_buffers(FixedBuffers fixed) {
    if (fixed.empty()) return;
    std::vector<iovec> iov;
    iov.reserve(fixed.size());
    for (std::span<std::byte> b : fixed) iov.push_back({b.data(), b.size()});
    if (io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size())) == 0) {
      fixed_.assign(fixed.begin(), fixed.end());
    }
  }

  std::string_view name() const override { return "io_uring"; }
  size_t fixed_buffers() const override { return fixed_.size(); }
  uint32_t depth() const override { return depth_; }
  size_t most_held() const override { return most_held_; }

  Status enqueue(const IoRequest& r) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      // The submission queue is full: hand what is queued to the kernel and retry once.
      Status st = submit();
      if (!st.ok()) return st;
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return {ErrorCode::kInternal, "io_uring submission queue full"};
    }
    const int index = fixed_index(r);
    if (index >= 0 && r.write) {
      io_uring_prep_write_fixed(sqe, r.fd, r.buffer, r.length, r.offset, index);
    } else if (index >= 0) {
      io_uring_prep_read_fixed(sqe, r.fd, r.buffer, r.length, r.offset, index);
    } else if (r.write) {
      io_uring_prep_write(sqe, r.fd, r.buffer, r.length, r.offset);
    } else {
      io_uring_prep_read(sqe, r.fd, r.buffer, r.length, r.offset);
    }
    io_uring_sqe_set_data64(sqe, r.tag);
    return {};
  }

  Status submit() override {
    int rc;
    do {
      rc = io_uring_submit(&ring_);
    } while (rc == -EINTR);
    // Short of memory for a moment, or completions to reap first: the requests stay queued and
    // wait() hands them over with its own call.
    if (rc < 0 && !transient(rc)) return posix_error(-rc, "io_uring_submit");
    return {};
  }

  Result<size_t> wait(std::span<IoCompletion> out) override {
    rearm();
    // Submits whatever is still queued (a submit refused for a moment) as it waits: a wait for
    // requests the kernel never got would never end.
    for (int refused = 0;;) {
      // Nothing to hand over and a completion there already: no system call (one a wait would
      // cost the I/O thread at every completion of a fast read).
      if (io_uring_sq_ready(&ring_) == 0 && io_uring_cq_ready(&ring_) > 0) break;
      const int rc = io_uring_submit_and_wait(&ring_, 1);
      if (io_uring_cq_ready(&ring_) > 0) break;
      if (rc >= 0) refused = 0;
      if (rc >= 0 || rc == -EINTR) continue;
      if (!transient(rc) || ++refused > kRefusalsBeforeError) {
        return fail(posix_error(-rc, "io_uring_submit_and_wait"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    io_uring_cqe* cqe = nullptr;
    size_t n = 0;
    bool woken = false;
    while (n < out.size() && io_uring_peek_cqe(&ring_, &cqe) == 0) {
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      if (tag == kWakeTag) {
        woken = true;
      } else {
        out[n++] = {tag, cqe->res};
      }
      io_uring_cqe_seen(&ring_, cqe);
    }
    if (woken) {
      uint64_t count = 0;
      // Reset the counter (0 already when two wakes met one poll); the next wait() polls again.
      [[maybe_unused]] const ssize_t got = ::read(wake_fd_, &count, sizeof count);
      armed_ = false;
    }
    return n;
  }

  void wake() override {
    if (wake_fd_ < 0) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t put = ::write(wake_fd_, &one, sizeof one);
  }

 private:
  /// The registered buffer holding all of `r`'s bytes, or -1.
  int fixed_index(const IoRequest& r) const {
    for (size_t i = 0; i < fixed_.size(); ++i) {
      const std::byte* b = fixed_[i].data();
      if (r.buffer >= b && r.buffer + r.length <= b + fixed_[i].size()) return static_cast<int>(i);
    }
    return -1;
  }

  /// Polls the eventfd once more where no poll is pending (each wake ends one). A ring that
  /// refuses the entry now is asked again at the next wait(); until then a wake goes unheard and
  /// that wait() returns at its next completion.
  void rearm() {
    if (wake_fd_ < 0 || armed_) return;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return;
    io_uring_prep_poll_add(sqe, wake_fd_, POLLIN);
    io_uring_sqe_set_data64(sqe, kWakeTag);
    // Queued now whether or not this submit goes through (the next one takes it along): arming
    // it again would leave two polls pending.
    armed_ = true;
    (void)submit();
  }

  uint32_t depth_;  // as asked, at most what the kernel granted
  size_t most_held_ = 1;
  io_uring ring_{};
  bool ready_ = false;
  int wake_fd_ = -1;    // set once, at init(); wake() may read it from any thread
  bool armed_ = false;  // a poll of wake_fd_ is pending (the engine's thread only)
  std::vector<std::span<std::byte>> fixed_;  // registered with the ring, in registration order
};

}  // namespace

Result<std::unique_ptr<IoEngine>> make_uring_engine(uint32_t depth, FixedBuffers fixed) {
  auto engine = std::make_unique<UringEngine>(depth);
  Status st = engine->init();
  if (!st.ok()) return fail(st);
  engine->register_buffers(fixed);
  return std::unique_ptr<IoEngine>(std::move(engine));
}

}  // namespace kvtier
