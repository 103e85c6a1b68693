// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <liburing.h>

#include <cerrno>

#include <fmt/format.h>

#include "common/posix.hpp"
#include "io/io_engine.hpp"

namespace kvtier {
namespace {

/// One io_uring per engine; requests go in as plain read/write SQEs (O_DIRECT comes from the fd).
class UringEngine final : public IoEngine {
 public:
  explicit UringEngine(uint32_t depth) : depth_(depth) {}
  ~UringEngine() override {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  UringEngine(const UringEngine&) = delete;
  UringEngine& operator=(const UringEngine&) = delete;

  Status init() {
    int rc = io_uring_queue_init(depth_, &ring_, 0);
    if (rc < 0) return Status(ErrorCode::kNotSupported, "io_uring_queue_init failed", -rc);
    ready_ = true;
    return {};
  }

  std::string_view name() const override { return "io_uring"; }
  uint32_t depth() const override { return depth_; }

  Status enqueue(const IoRequest& r) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      // The submission queue is full: hand what is queued to the kernel and retry once.
      Status st = submit();
      if (!st.ok()) return st;
      sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return {ErrorCode::kInternal, "io_uring submission queue full"};
    }
    if (r.write) {
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
    if (rc < 0) return posix_error(-rc, "io_uring_submit");
    return {};
  }

  Result<size_t> wait(std::span<IoCompletion> out) override {
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
      rc = io_uring_wait_cqe(&ring_, &cqe);
    } while (rc == -EINTR);
    if (rc < 0) return fail(posix_error(-rc, "io_uring_wait_cqe"));
    size_t n = 0;
    while (n < out.size() && io_uring_peek_cqe(&ring_, &cqe) == 0) {
      out[n++] = {io_uring_cqe_get_data64(cqe), cqe->res};
      io_uring_cqe_seen(&ring_, cqe);
    }
    return n;
  }

 private:
  uint32_t depth_;
  io_uring ring_{};
  bool ready_ = false;
};

}  // namespace

Result<std::unique_ptr<IoEngine>> make_uring_engine(uint32_t depth) {
  auto engine = std::make_unique<UringEngine>(depth);
  Status st = engine->init();
  if (!st.ok()) return fail(st);
  return std::unique_ptr<IoEngine>(std::move(engine));
}

}  // namespace kvtier
