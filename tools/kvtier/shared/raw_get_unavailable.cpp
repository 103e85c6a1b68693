// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Built without hiredis: the shared workload's ceiling cannot be measured (nor can the remote tier
// run).
#include "raw_get.hpp"

namespace kvtier::shared {

struct RawGet::Impl {};

RawGet::RawGet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RawGet::~RawGet() = default;

Result<std::unique_ptr<RawGet>> RawGet::create(const RawGetConfig&) {
  return fail(ErrorCode::kNotSupported, "raw GET: kvtier was built without hiredis");
}

Result<RawGetResult> RawGet::run(std::span<const RemoteRecordKey>, uint64_t) {
  return fail(ErrorCode::kNotSupported, "raw GET: kvtier was built without hiredis");
}

}  // namespace kvtier::shared
