// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The remote tier in a build without hiredis: every attempt to use it says so.
#include "remote/cluster_client.hpp"

namespace kvtier::remote {

struct ClusterClient::Impl {};

Result<std::unique_ptr<ClusterClient>> ClusterClient::create(ClientConfig /*config*/) {
  return fail(ErrorCode::kNotSupported,
              "remote tier: this kvtier was built without hiredis (install libhiredis-dev and "
              "rebuild with KVTIER_WITH_REDIS=AUTO or ON)");
}

ClusterClient::ClusterClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterClient::~ClusterClient() = default;

// Unreachable: no ClusterClient exists in this build.
std::vector<KeyOutcome> ClusterClient::get(std::span<const std::string> keys,
                                           const ValueSink& /*sink*/) {
  return std::vector<KeyOutcome>(keys.size());
}
std::vector<KeyOutcome> ClusterClient::get_owned(std::span<const std::string> keys,
                                                 const OwnedValueSink& /*sink*/,
                                                 const ValueAllocator* /*allocate*/) {
  return std::vector<KeyOutcome>(keys.size());
}
std::vector<KeyOutcome> ClusterClient::sizes(std::span<const std::string> keys,
                                             uint32_t /*max_attempts*/) {
  return std::vector<KeyOutcome>(keys.size());
}
std::vector<KeyOutcome> ClusterClient::set(std::span<const std::string> keys,
                                           std::span<const std::span<const std::byte>> /*values*/,
                                           std::chrono::milliseconds /*ttl*/) {
  return std::vector<KeyOutcome>(keys.size());
}
Status ClusterClient::refresh() {
  return Status(ErrorCode::kNotSupported, "remote tier: built without hiredis");
}
bool ClusterClient::standalone() const { return false; }
ClientCounters ClusterClient::counters() const { return {}; }

}  // namespace kvtier::remote
