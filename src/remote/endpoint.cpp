// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "remote/endpoint.hpp"

#include <charconv>

#include <fmt/format.h>

namespace kvtier::remote {
namespace {

Failure bad(std::string_view text, std::string_view why) {
  return fail(ErrorCode::kInvalidArgument, fmt::format("remote endpoint '{}': {}", text, why));
}

}  // namespace

Result<Endpoint> parse_endpoint(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad(text, "expected host:port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return bad(text, "empty host");
  uint32_t port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return bad(text, "port must be a number in 1..65535");
  }
  return Endpoint{std::string(host), static_cast<uint16_t>(port)};
}

Result<std::vector<Endpoint>> parse_seeds(std::string_view uri) {
  constexpr std::string_view kScheme = "redis://";
  if (uri.starts_with(kScheme)) uri.remove_prefix(kScheme.size());
  if (uri.find("://") != std::string_view::npos) {
    return fail(ErrorCode::kInvalidArgument, "remote seeds: only redis:// is supported (no TLS)");
  }
  if (uri.find('@') != std::string_view::npos) {
    return fail(ErrorCode::kInvalidArgument,
                "remote seeds: no credentials in the URI; give the password through an "
                "environment variable or a file");
  }
  std::vector<Endpoint> seeds;
  while (!uri.empty()) {
    const size_t comma = uri.find(',');
    const std::string_view item = uri.substr(0, comma);
    auto endpoint = parse_endpoint(item);
    if (!endpoint) return fail(endpoint.error());
    seeds.push_back(std::move(*endpoint));
    if (comma == std::string_view::npos) break;
    uri.remove_prefix(comma + 1);
  }
  if (seeds.empty()) return fail(ErrorCode::kInvalidArgument, "remote seeds: none given");
  return seeds;
}

}  // namespace kvtier::remote
