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

namespace {

/// Runs fn(i) for i in [0, n) on up to four threads (one per core): coding costs more CPU than
/// moving the bytes.
template <typename Fn>
void on_threads(size_t n, Fn&& fn) {
  const size_t threads =
      std::min<size_t>(n, std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<std::future<void>> running;
  for (size_t t = 0; t < threads; ++t) {
    running.push_back(std::async(std::launch::async, [&, t] {
      for (size_t i = t; i < n; i += threads) fn(i);
    }));
  }
  for (auto& r : running) r.get();
}

}  // namespace

Status code_payloads(std::span<const std::vector<std::byte>> raw,
                     std::span<std::optional<std::vector<std::byte>>> coded) {
  std::vector<Status> status(raw.size());
  on_threads(raw.size(), [&](size_t i) {
    auto one = code_payload(raw[i]);
    if (one) {
      coded[i] = std::move(*one);
    } else {
      status[i] = one.error();
    }
  });
  for (Status& st : status) KVTIER_TRY(st);
  return {};
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
