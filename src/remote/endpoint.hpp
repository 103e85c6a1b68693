// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Where a Redis node listens, and the seed list users write: redis://host:port[,host:port...].
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier::remote {

struct Endpoint {
  std::string host;
  uint16_t port = 0;

  [[nodiscard]] std::string to_string() const { return host + ":" + std::to_string(port); }
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

/// How long a connect and a command may take before the node counts as unreachable.
struct Timeouts {
  std::chrono::milliseconds connect{500};
  std::chrono::milliseconds command{2000};
};

/// Parses "host:port" (IPv6 as "[addr]:port").
[[nodiscard]] Result<Endpoint> parse_endpoint(std::string_view text);

/// Parses "redis://host:port[,host:port...]" or the same list without the scheme. A password in the
/// URI ("redis://user:pw@...") is refused: credentials come from an environment variable or a
/// file, so they never sit in a command line or a log.
[[nodiscard]] Result<std::vector<Endpoint>> parse_seeds(std::string_view uri);

}  // namespace kvtier::remote
