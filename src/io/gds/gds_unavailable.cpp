// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// GdsContext where kvtier was built without cufile.h: every attempt says so.
#include "io/gds/gds.hpp"

namespace kvtier {

class GdsContext::Impl {};

bool gds_compiled_in() { return false; }

GdsContext::GdsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GdsContext::~GdsContext() = default;

Result<std::unique_ptr<GdsContext>> GdsContext::create(Gpu, size_t, size_t) {
  return fail(ErrorCode::kNotSupported,
              "kvtier was built without cufile.h (CUDA toolkit or the nvidia-cufile package)");
}

const GdsMode& GdsContext::mode() const {
  static const GdsMode none;
  return none;
}
StagingPool& GdsContext::buffers() {
  static StagingPool none(std::vector<std::span<std::byte>>{}, 0);  // never reached: create() fails
  return none;
}
Status GdsContext::attach(int, const std::string&, std::shared_ptr<const void>) {
  return {ErrorCode::kNotSupported, "no cuFile"};
}
Status GdsContext::read(int, std::byte*, uint64_t, size_t) {
  return {ErrorCode::kNotSupported, "no cuFile"};
}
Status GdsContext::write(int, std::byte*, uint64_t, size_t) {
  return {ErrorCode::kNotSupported, "no cuFile"};
}
std::string GdsContext::io_counts() const { return {}; }

}  // namespace kvtier
