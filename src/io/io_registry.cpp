// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one place that knows which optional I/O engines this build has.
#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "io/io_engine.hpp"
#include "kvtier/build_config.hpp"

namespace kvtier {

#if !KVTIER_HAVE_IO_URING
Result<std::unique_ptr<IoEngine>> make_uring_engine(uint32_t, FixedBuffers) {
  return fail(ErrorCode::kNotSupported, "kvtier was built without liburing");
}
#endif

namespace {

std::mutex wrapper_mu;
IoEngineWrapper wrapper;  // tests only

std::unique_ptr<IoEngine> wrapped(std::unique_ptr<IoEngine> engine) {
  std::lock_guard lock(wrapper_mu);
  return wrapper ? wrapper(std::move(engine)) : std::move(engine);
}

}  // namespace

void set_io_engine_wrapper_for_testing(IoEngineWrapper wrap) {
  std::lock_guard lock(wrapper_mu);
  wrapper = std::move(wrap);
}

std::unique_ptr<IoEngine> make_io_engine(IoPath path, uint32_t depth, std::string& fallback,
                                         FixedBuffers fixed) {
  // pread/pwrite run on up to this many threads: one per request in flight, bounded so a large
  // staging pool does not mean dozens of threads per operation.
  constexpr uint32_t kMaxPosixThreads = 8;
  const uint32_t threads = std::clamp<uint32_t>(depth, 1, kMaxPosixThreads);
  if (path == IoPath::kBuffered) return wrapped(make_posix_engine(threads));
  auto uring = make_uring_engine(depth, fixed);
  if (uring) return wrapped(std::move(*uring));
  fallback =
      fmt::format("io_uring unavailable ({}); using pread/pwrite", uring.error().to_string());
  return wrapped(make_posix_engine(threads));
}

}  // namespace kvtier
