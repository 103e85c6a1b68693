// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one place that knows which optional I/O engines this build has.
#include <fmt/format.h>

#include "io/io_engine.hpp"
#include "kvtier/build_config.hpp"

namespace kvtier {

#if !KVTIER_HAVE_IO_URING
Result<std::unique_ptr<IoEngine>> make_uring_engine(uint32_t) {
  return fail(ErrorCode::kNotSupported, "kvtier was built without liburing");
}
#endif

std::unique_ptr<IoEngine> make_io_engine(IoPath path, uint32_t depth, std::string& fallback) {
  if (path == IoPath::kBuffered) return make_posix_engine();
  auto uring = make_uring_engine(depth);
  if (uring) return std::move(*uring);
  fallback = fmt::format("io_uring unavailable ({}); using pread/pwrite", uring.error().to_string());
  return make_posix_engine();
}

}  // namespace kvtier
