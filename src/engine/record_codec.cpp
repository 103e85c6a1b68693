// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/record_codec.hpp"

#include <algorithm>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "api/try.hpp"
#include "codec/split16.hpp"

namespace kvtier {

Result<std::optional<std::vector<std::byte>>> code_payload(std::span<const std::byte> raw) {
  std::vector<std::byte> out(codec::split16_bound(raw.size()));
  KVTIER_ASSIGN_OR_RETURN(size_t n, codec::split16_encode(raw, out));
  if (n > raw.size() - raw.size() / kCodedSaving) return std::optional<std::vector<std::byte>>();
  out.resize(n);
  out.shrink_to_fit();
  return std::optional<std::vector<std::byte>>(std::move(out));
}

Status code_payloads(std::span<const std::vector<std::byte>> raw,
                     std::span<std::optional<std::vector<std::byte>>> coded) {
  const size_t threads =
      std::min<size_t>(raw.size(), std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<std::future<Status>> running;
  for (size_t t = 0; t < threads; ++t) {
    running.push_back(std::async(std::launch::async, [&, t]() -> Status {
      for (size_t i = t; i < raw.size(); i += threads) {
        auto one = code_payload(raw[i]);
        if (!one) return one.error();
        coded[i] = std::move(*one);
      }
      return {};
    }));
  }
  Status first;
  for (auto& r : running) {
    Status st = r.get();
    if (first.ok()) first = st;
  }
  return first;
}

Status decode_payload(std::span<const std::byte> stored, std::span<std::byte> raw) {
  auto declared = codec::split16_decoded_bytes(stored);
  if (!declared) return declared.error();
  if (*declared != raw.size()) {
    return {ErrorCode::kCorrupt,
            fmt::format("a coded payload declares {} bytes where its record holds {}", *declared,
                        raw.size())};
  }
  return codec::split16_decode(stored, raw);
}

}  // namespace kvtier
