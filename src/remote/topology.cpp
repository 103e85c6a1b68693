// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "remote/topology.hpp"

#include <charconv>

#include <fmt/format.h>

#include "remote/slot.hpp"

namespace kvtier::remote {
namespace {

Failure malformed(std::string_view what) {
  return fail(ErrorCode::kIo, fmt::format("redis CLUSTER SLOTS: malformed reply ({})", what));
}

bool valid_slot(long long value) {
  return value >= 0 && value < static_cast<long long>(kSlotCount);
}

Result<SlotRange> parse_range(const redisReply& entry, const Endpoint& asked) {
  if (entry.type != REDIS_REPLY_ARRAY || entry.elements < 3)
    return malformed("entry is not [first, last, master...]");
  const redisReply& first = *entry.element[0];
  const redisReply& last = *entry.element[1];
  const redisReply& master = *entry.element[2];
  if (first.type != REDIS_REPLY_INTEGER || last.type != REDIS_REPLY_INTEGER ||
      !valid_slot(first.integer) || !valid_slot(last.integer) || first.integer > last.integer) {
    return malformed("bad slot numbers");
  }
  if (master.type != REDIS_REPLY_ARRAY || master.elements < 2 ||
      master.element[0]->type != REDIS_REPLY_STRING ||
      master.element[1]->type != REDIS_REPLY_INTEGER || master.element[1]->integer <= 0 ||
      master.element[1]->integer > 65535) {
    return malformed("bad master address");
  }
  std::string host(reply_text(*master.element[0]));
  if (host.empty() || host == "?") host = asked.host;
  return SlotRange{static_cast<uint16_t>(first.integer), static_cast<uint16_t>(last.integer),
                   Endpoint{std::move(host), static_cast<uint16_t>(master.element[1]->integer)}};
}

}  // namespace

Result<std::vector<SlotRange>> parse_cluster_slots(const redisReply& reply, const Endpoint& asked) {
  if (reply.type != REDIS_REPLY_ARRAY) return malformed("not an array");
  std::vector<SlotRange> ranges;
  ranges.reserve(reply.elements);
  for (size_t i = 0; i < reply.elements; ++i) {
    auto range = parse_range(*reply.element[i], asked);
    if (!range) return fail(range.error());
    ranges.push_back(std::move(*range));
  }
  return ranges;
}

Result<Redirect> parse_redirect(std::string_view text, const Endpoint& asked) {
  Redirect redirect;
  if (text.starts_with("ASK ")) {
    redirect.ask = true;
    text.remove_prefix(4);
  } else if (text.starts_with("MOVED ")) {
    text.remove_prefix(6);
  } else {
    return fail(ErrorCode::kIo, fmt::format("redis: not a redirection: {}", text));
  }
  const size_t space = text.find(' ');
  uint32_t slot = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + std::min(space, text.size()), slot);
  if (space == std::string_view::npos || ec != std::errc() || end != text.data() + space ||
      slot >= kSlotCount) {
    return fail(ErrorCode::kIo, fmt::format("redis: malformed redirection: {}", text));
  }
  redirect.slot = static_cast<uint16_t>(slot);
  std::string target_text(text.substr(space + 1));
  if (target_text.starts_with(':')) target_text.insert(0, asked.host);
  auto target = parse_endpoint(target_text);
  if (!target)
    return fail(ErrorCode::kIo, fmt::format("redis: malformed redirection target: {}", text));
  redirect.target = std::move(*target);
  return redirect;
}

}  // namespace kvtier::remote
