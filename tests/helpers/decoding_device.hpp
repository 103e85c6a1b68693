// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A host-emulated device that decodes coded records itself, as the CUDA device does
// (DeviceTransfer::expect_coded / stage_coded / land_coded / decode_failures): it keeps each coded
// record's stored bytes in a room of its own as they are staged, and at land_coded checks the
// stream's head it is handed against them, decodes the room and scatters the decoded payload
// through the host transfer, reporting a stream it cannot decode in decode_failures() after
// scattering what it has (the GPU leaves such blocks unwritten). On the CPU this runs the read
// route's device-decoding path, which the GPU alone otherwise takes. While a DecodingDeviceScope
// lives, engines opened get it in place of the host device.
#pragma once

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "codec/split16.hpp"
#include "device/device.hpp"

namespace kvtier::testing {

class DecodingTransfer final : public DeviceTransfer {
 public:
  explicit DecodingTransfer(std::unique_ptr<DeviceTransfer> inner) : inner_(std::move(inner)) {}

  Status scatter(size_t slot, std::span<const std::byte> piece,
                 std::span<const PieceSpan> spans) override {
    return inner_->scatter(slot, piece, spans);
  }
  Status gather(size_t slot, std::span<std::byte> piece,
                std::span<const PieceSpan> spans) override {
    return inner_->gather(slot, piece, spans);
  }
  Status release(size_t slot) override { return inner_->release(slot); }
  Result<std::vector<uint64_t>> finish() override { return inner_->finish(); }
  Result<std::vector<uint64_t>> record_sums(std::span<const RecordRange> records) override {
    return inner_->record_sums(records);
  }
  uint64_t host_memory_bytes() const override { return inner_->host_memory_bytes(); }

  Status expect_coded(std::span<const CodedSize> sizes) override {
    sizes_.assign(sizes.begin(), sizes.end());
    rooms_.resize(sizes.size());
    for (size_t r = 0; r < sizes.size(); ++r) rooms_[r].resize(sizes[r].stored_bytes);
    return {};
  }

  Status stage_coded(size_t, std::span<const std::byte> piece,
                     std::span<const PieceSpan> spans) override {
    for (const PieceSpan& s : spans) {
      if (s.record >= rooms_.size() || s.payload_offset + s.bytes > rooms_[s.record].size() ||
          s.piece_offset + s.bytes > piece.size()) {
        return {ErrorCode::kInternal, "stage_coded: a span outside its record's room or piece"};
      }
      std::memcpy(rooms_[s.record].data() + s.payload_offset, piece.data() + s.piece_offset,
                  s.bytes);
    }
    return {};
  }

  Status land_coded(uint32_t record, std::span<const std::byte> head, uint64_t first_token,
                    uint32_t token_count) override {
    const std::vector<std::byte>& room = rooms_.at(record);
    // The read route promises the head is the room's first bytes (both from one staging piece).
    if (head.size() > room.size() || std::memcmp(head.data(), room.data(), head.size()) != 0)
      return {ErrorCode::kInternal, "land_coded: a head that is not the staged bytes'"};
    auto table = codec::split16_table(head, /*header_only=*/true);
    if (!table) return table.error();
    if (table->decoded_bytes != sizes_[record].raw_bytes ||
        table->stored_bytes != sizes_[record].stored_bytes) {
      return {ErrorCode::kCorrupt, "land_coded: a stream of other sizes than its record's"};
    }
    std::vector<std::byte> raw(sizes_[record].raw_bytes, std::byte{0xEE});
    if (!codec::split16_decode(room, raw).ok()) {
      std::lock_guard lock(mu_);
      failures_.push_back(record);
    }
    const PieceSpan whole{0, 0, raw.size(), first_token, token_count, record};
    return inner_->scatter(0, raw, std::span(&whole, 1));
  }

  std::vector<uint32_t> decode_failures() const override {
    std::lock_guard lock(mu_);
    return failures_;
  }

 private:
  std::unique_ptr<DeviceTransfer> inner_;
  std::vector<CodedSize> sizes_;
  std::vector<std::vector<std::byte>> rooms_;  // written in disjoint ranges, read once whole
  mutable std::mutex mu_;
  std::vector<uint32_t> failures_;  // guarded by mu_
};

class DecodingDevice final : public Device {
 public:
  explicit DecodingDevice(std::unique_ptr<Device> host) : host_(std::move(host)) {}
  std::string_view name() const override { return "host-emulated, decoding"; }
  bool accepts(MemoryKind kind) const override { return host_->accepts(kind); }
  Result<std::unique_ptr<DeviceTransfer>> begin(const KvMemory& target, size_t records,
                                                size_t slots, size_t slot_bytes) override {
    auto inner = host_->begin(target, records, slots, slot_bytes);
    if (!inner) return inner;
    return std::unique_ptr<DeviceTransfer>(new DecodingTransfer(std::move(*inner)));
  }

 private:
  std::unique_ptr<Device> host_;
};

/// Engines opened while it lives decode coded records "on the device" (DecodingDevice).
class DecodingDeviceScope {
 public:
  DecodingDeviceScope() {
    set_host_device_wrapper_for_testing([](std::unique_ptr<Device> host) {
      return std::unique_ptr<Device>(new DecodingDevice(std::move(host)));
    });
  }
  ~DecodingDeviceScope() { set_host_device_wrapper_for_testing({}); }
  DecodingDeviceScope(const DecodingDeviceScope&) = delete;
  DecodingDeviceScope& operator=(const DecodingDeviceScope&) = delete;
};

}  // namespace kvtier::testing
