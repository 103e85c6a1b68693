// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The I/O engine interface: queued reads and writes of file ranges, completed asynchronously.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kvtier/options.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

struct IoRequest {
  int fd = -1;
  uint64_t offset = 0;
  std::byte* buffer = nullptr;
  uint32_t length = 0;
  bool write = false;
  uint64_t tag = 0;  ///< Returned in the completion.
};

struct IoCompletion {
  uint64_t tag = 0;
  int64_t result = 0;  ///< Bytes transferred, or -errno.
};

/// @brief A queue of file I/O. Each engine is used by one thread at a time; make one per operation.
class IoEngine {
 public:
  virtual ~IoEngine() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Most requests that run at once (the ring's entries, the pread threads).
  [[nodiscard]] virtual uint32_t depth() const = 0;
  /// Most requests the engine may hold at once, running or queued inside it; a pipeline with more
  /// staging slots leaves the rest to others. io_uring: what its completion queue holds.
  [[nodiscard]] virtual size_t most_held() const { return SIZE_MAX; }
  /// Queues a request; it may start at once or at submit().
  [[nodiscard]] virtual Status enqueue(const IoRequest& request) = 0;
  /// How many buffers the kernel holds registered for this engine (make_uring_engine's `fixed`).
  [[nodiscard]] virtual size_t fixed_buffers() const { return 0; }
  /// Starts every queued request.
  [[nodiscard]] virtual Status submit() = 0;
  /// Waits until at least one request has completed, or wake() was called; writes up to
  /// out.size() completions (none after a wake that came first). Requests still queued (a submit
  /// the kernel refused for a moment) are started first.
  [[nodiscard]] virtual Result<size_t> wait(std::span<IoCompletion> out) = 0;
  /// Makes a wait() blocked now, or the next one, return: another thread has work for the
  /// engine's thread (a staging slot freed while every request of the engine's thread is still in
  /// flight). The one call any thread may make. An engine whose wait() cannot be woken keeps the
  /// default: that wait then returns at its next completion.
  virtual void wake() {}
};

/// pread/pwrite, the buffered baseline: on the caller's thread inside enqueue() with one thread,
/// else on `threads` threads (one request in flight each).
std::unique_ptr<IoEngine> make_posix_engine(uint32_t threads = 1);

/// Buffers an engine may register with the kernel for its life (io_uring's fixed buffers): a
/// request inside one of them then skips pinning its pages on every read or write.
using FixedBuffers = std::span<const std::span<std::byte>>;

/// io_uring with `depth` entries; kNotSupported where the kernel or sandbox refuses io_uring.
/// `fixed` are registered when the kernel allows it (a locked-memory limit may refuse: requests
/// then go as plain ones).
[[nodiscard]] Result<std::unique_ptr<IoEngine>> make_uring_engine(uint32_t depth,
                                                                  FixedBuffers fixed = {});

/// The engine for `path` ("auto"/"direct" prefer io_uring, "buffered" uses pread/pwrite). When
/// io_uring is unavailable, `fallback` says why and the POSIX engine is returned. `fixed`: as for
/// make_uring_engine (the POSIX engine has nothing to register).
std::unique_ptr<IoEngine> make_io_engine(IoPath path, uint32_t depth, std::string& fallback,
                                         FixedBuffers fixed = {});

/// Fault-injection seam for tests: while set, every engine make_io_engine() returns is passed
/// through `wrap` first (which may wrap it in one that fails or shortens requests). Empty: off.
using IoEngineWrapper = std::function<std::unique_ptr<IoEngine>(std::unique_ptr<IoEngine>)>;
void set_io_engine_wrapper_for_testing(IoEngineWrapper wrap);

}  // namespace kvtier
