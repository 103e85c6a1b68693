// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The device layer: moves KV bytes between staging memory and the memory a caller handed in.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "kvtier/kv_view.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// @brief Copies between host staging buffers and KV memory, summing payload checksums on the way.
/// Implementations: the host-emulated device (KV memory is host memory; the whole pipeline runs on
/// a CPU) and, in GPU builds, CUDA. Thread-safe.
class Device {
 public:
  virtual ~Device() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Whether `view` is memory this device can address.
  [[nodiscard]] virtual bool accepts(const MemoryView& view) const = 0;
  /// Copies `src` to `dst` + `offset`; returns the kvsum partial of the bytes, which start at word
  /// `first_word` of their record's payload.
  [[nodiscard]] virtual Result<uint64_t> copy_in(const MemoryView& dst, uint64_t offset,
                                                 std::span<const std::byte> src,
                                                 uint64_t first_word) = 0;
  /// Copies `src` + `offset` into `dst`; returns the kvsum partial like copy_in().
  [[nodiscard]] virtual Result<uint64_t> copy_out(std::span<std::byte> dst, const MemoryView& src,
                                                  uint64_t offset, uint64_t first_word) = 0;
  /// kvsum partial of `src` + `offset`, `bytes` long, without copying.
  [[nodiscard]] virtual Result<uint64_t> sum(const MemoryView& src, uint64_t offset, uint64_t bytes,
                                             uint64_t first_word) = 0;
};

/// The host-emulated device: KV memory is host memory (MemoryKind::kHost).
std::unique_ptr<Device> make_host_device();

}  // namespace kvtier
