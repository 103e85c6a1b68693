// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "device/device.hpp"
#include "store/checksum.hpp"

namespace kvtier {
namespace {

class HostDevice final : public Device {
 public:
  std::string_view name() const override { return "host-emulated"; }
  bool accepts(const MemoryView& view) const override {
    return view.kind == MemoryKind::kHost && view.data != nullptr;
  }
  Result<uint64_t> copy_in(const MemoryView& dst, uint64_t offset, std::span<const std::byte> src,
                           uint64_t first_word) override {
    return kvsum::copy_partial(dst.data + offset, src.data(), src.size(), first_word);
  }
  Result<uint64_t> copy_out(std::span<std::byte> dst, const MemoryView& src, uint64_t offset,
                            uint64_t first_word) override {
    return kvsum::copy_partial(dst.data(), src.data + offset, dst.size(), first_word);
  }
  Result<uint64_t> sum(const MemoryView& src, uint64_t offset, uint64_t bytes,
                       uint64_t first_word) override {
    return kvsum::partial(src.data + offset, bytes, first_word);
  }
};

}  // namespace

std::unique_ptr<Device> make_host_device() { return std::make_unique<HostDevice>(); }

}  // namespace kvtier
