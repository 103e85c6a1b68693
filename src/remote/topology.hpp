// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Which master serves which hash slots, as CLUSTER SLOTS reports it.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtier/status.hpp"
#include "remote/connection.hpp"

namespace kvtier::remote {

struct SlotRange {
  uint16_t first = 0;
  uint16_t last = 0;  // inclusive
  Endpoint master;
};

/// Parses a CLUSTER SLOTS reply: an array of [first, last, [host, port, id...], replicas...].
/// An empty host (the node does not know its own address) means the node that was asked.
[[nodiscard]] Result<std::vector<SlotRange>> parse_cluster_slots(const redisReply& reply,
                                                                 const Endpoint& asked);

/// Parses the "<slot> <host>:<port>" tail of a MOVED or ASK error ("MOVED 3999 127.0.0.1:6381").
struct Redirect {
  bool ask = false;
  uint16_t slot = 0;
  Endpoint target;
};
/// A target without a host (":6381") is on the host of the node that answered, `asked`.
[[nodiscard]] Result<Redirect> parse_redirect(std::string_view error_text, const Endpoint& asked);

}  // namespace kvtier::remote
