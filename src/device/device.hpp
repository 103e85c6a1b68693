// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The device layer: moves payload bytes between host staging and the caller's KV memory, in any
// supported layout, summing payload checksums on the way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device/kv_layout.hpp"
#include "kvtier/kv_view.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// A caller's KV memory as the engine sees it, the place a restore writes into and a save reads
/// from: layout parameters with host-side pointers (the addresses the caller gave), plus where
/// that memory lives.
struct KvMemory {
  KvLayoutParams params;  ///< layer_base / block_table unset: see below
  MemoryKind kind = MemoryKind::kHost;
  int device = 0;
  std::vector<uint8_t*> layer_base;  ///< paged forms
  std::vector<int32_t> block_table;  ///< paged forms
  void* stream = nullptr;            ///< CUDA: the caller's stream to order after (null: legacy)
};

/// A record's place in the session: its tokens [first_token, first_token + token_count).
struct RecordRange {
  uint64_t first_token = 0;
  uint32_t token_count = 0;
};

/// A coded record's payload sizes (Options::compression): what is stored, what it decodes to.
struct CodedSize {
  uint64_t stored_bytes = 0;  ///< 0: the record is not coded
  uint64_t raw_bytes = 0;
};

/// @brief One save or restore against one target. Not thread-safe across calls on the same slot;
/// scatter() on different slots may run concurrently.
class DeviceTransfer {
 public:
  virtual ~DeviceTransfer() = default;
  /// Restore: places the payload spans of `piece` (host staging, slot `slot`) into the target and
  /// adds their kvsum terms to the records' sums. May complete asynchronously, until release(slot).
  [[nodiscard]] virtual Status scatter(size_t slot, std::span<const std::byte> piece,
                                       std::span<const PieceSpan> spans) = 0;
  /// Restore from a piece already in device memory (GPUDirect Storage): like scatter(), minus the
  /// copy to the device. Asynchronous until release(slot).
  [[nodiscard]] virtual Status scatter_device(size_t /*slot*/, const std::byte* /*device_piece*/,
                                              std::span<const PieceSpan> /*spans*/) {
    return {ErrorCode::kNotSupported, "this device has no device-resident staging"};
  }
  /// Copies `host.size()` bytes of device memory at `device_src` to `host`, in order with the work
  /// of `slot`; complete on return (used for record headers read by GPUDirect Storage).
  [[nodiscard]] virtual Status read_device(size_t /*slot*/, const std::byte* /*device_src*/,
                                           std::span<std::byte> /*host*/) {
    return {ErrorCode::kNotSupported, "this device has no device memory"};
  }
  /// Save through GPUDirect Storage: builds a piece in device memory at `device_piece` (a
  /// registered buffer): payload spans gathered from the target, `host_parts` (offset in the piece,
  /// bytes: headers) copied up, `zero_parts` (offset, length: padding) cleared. Complete on return.
  [[nodiscard]] virtual Status stage_device(
      size_t /*slot*/, std::byte* /*device_piece*/, std::span<const PieceSpan> /*spans*/,
      std::span<const std::pair<uint64_t, std::span<const std::byte>>> /*host_parts*/,
      std::span<const std::pair<uint64_t, uint64_t>> /*zero_parts*/) {
    return {ErrorCode::kNotSupported, "this device has no device memory"};
  }
  /// Restore of coded records decoded on the device: makes room for the stored and the decoded
  /// payload of each record with `sizes[record].stored_bytes` > 0 (a split16 stream,
  /// codec/split16.hpp). kNotSupported where this transfer does not decode: the caller decodes on
  /// the host and scatters the decoded bytes.
  [[nodiscard]] virtual Status expect_coded(std::span<const CodedSize> /*sizes*/) {
    return {ErrorCode::kNotSupported, "this device does not decode coded records"};
  }
  /// Copies the stored bytes of `spans` of `piece` (host staging, slot `slot`; payload_offset into
  /// the record's stored payload) to the record's room. Asynchronous until release(slot).
  [[nodiscard]] virtual Status stage_coded(size_t /*slot*/, std::span<const std::byte> /*piece*/,
                                           std::span<const PieceSpan> /*spans*/) {
    return {ErrorCode::kNotSupported, "this device does not decode coded records"};
  }
  /// Record `record`'s stored payload is all staged: decodes it, `head` being the stream's header
  /// and table as read (on the host), and scatters the decoded payload into the target at
  /// `first_token`, adding its kvsum terms to the record's sum. kCorrupt (nothing launched) when
  /// the header or table is refused or disagrees with the record's sizes; a block the decoder
  /// refuses shows in decode_failures(). Asynchronous until finish().
  [[nodiscard]] virtual Status land_coded(uint32_t /*record*/, std::span<const std::byte> /*head*/,
                                          uint64_t /*first_token*/, uint32_t /*token_count*/) {
    return {ErrorCode::kNotSupported, "this device does not decode coded records"};
  }
  /// After finish(): the records whose blocks the device decoder refused (damaged data).
  [[nodiscard]] virtual std::vector<uint32_t> decode_failures() const { return {}; }
  /// Save: fills the payload spans of `piece` from the target; complete on return.
  [[nodiscard]] virtual Status gather(size_t slot, std::span<std::byte> piece,
                                      std::span<const PieceSpan> spans) = 0;
  /// Waits until the staging memory of `slot` may be reused.
  [[nodiscard]] virtual Status release(size_t slot) = 0;
  /// Waits for all outstanding work; returns the kvsum partial sums scatter() accumulated, one per
  /// record.
  [[nodiscard]] virtual Result<std::vector<uint64_t>> finish() = 0;
  /// Save: kvsum partial sums of whole records read from the target.
  [[nodiscard]] virtual Result<std::vector<uint64_t>> record_sums(
      std::span<const RecordRange> records) = 0;
  /// Bytes this transfer moved between host staging and device memory (0 for host targets).
  [[nodiscard]] virtual uint64_t device_copy_bytes() const { return 0; }
  /// Host memory traffic of this transfer's copies, accounted from what they moved: a DMA between
  /// host and device touches host memory once per byte, a CPU copy twice (read and write).
  [[nodiscard]] virtual uint64_t host_memory_bytes() const { return device_copy_bytes(); }
};

/// @brief A place KV memory can live: the host (the host-emulated device) or a CUDA GPU.
/// Thread-safe.
class Device {
 public:
  virtual ~Device() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual bool accepts(MemoryKind kind) const = 0;
  /// Starts a transfer over `records` records using `slots` staging slots of `slot_bytes`.
  [[nodiscard]] virtual Result<std::unique_ptr<DeviceTransfer>> begin(const KvMemory& target,
                                                                      size_t records, size_t slots,
                                                                      size_t slot_bytes) = 0;
  /// Memory of GPU `device` for another library to register and use (cuFile's staging buffers),
  /// freed there by its last owner. kNotSupported where this device has no memory of its own.
  [[nodiscard]] virtual Result<std::shared_ptr<std::byte>> allocate(int /*device*/,
                                                                    size_t /*bytes*/) {
    return fail(ErrorCode::kNotSupported, "this device has no memory of its own");
  }
  /// Makes GPU `device` current on the calling thread, for a library that acts on the current one
  /// (cuFile).
  [[nodiscard]] virtual Status make_current(int /*device*/) { return {}; }
  /// Pins host staging memory once so copies from it can run asynchronously.
  [[nodiscard]] virtual Status register_staging(std::span<std::byte> /*memory*/) { return {}; }
  /// Undoes register_staging() before the memory is freed.
  virtual void unregister_staging(std::span<std::byte> /*memory*/) noexcept {}
  /// kInvalidArgument when `view` is not memory of this device (e.g. a host pointer passed as
  /// CUDA memory), so a caller's mistake is an error rather than a fault or silent corruption.
  [[nodiscard]] virtual Status check_memory(const MemoryView& /*view*/) const { return {}; }
  /// kNotSupported when this device cannot move KV laid out as `params` (checked before any I/O,
  /// so a save or restore it cannot serve is an error, not a miss).
  [[nodiscard]] virtual Status check_shape(const KvLayoutParams& /*params*/) const { return {}; }
};

/// The host-emulated device: KV memory is host memory (MemoryKind::kHost).
std::unique_ptr<Device> make_host_device();

/// Tests: make_host_device() hands its device to `wrap` while one is set (empty: none), so a test
/// can stand a device with other abilities (one that decodes coded records) in the host's place.
using HostDeviceWrapper = std::function<std::unique_ptr<Device>(std::unique_ptr<Device>)>;
void set_host_device_wrapper_for_testing(HostDeviceWrapper wrap);

/// The CUDA device where this build has CUDA and the machine a GPU; otherwise the reason why not.
/// Defined by the layer above (src/cuda/: cuda_device.cpp, or cuda_unavailable.cpp in a build
/// without CUDA), so only its callers (the data path) link that layer.
Result<std::unique_ptr<Device>> make_cuda_device();

}  // namespace kvtier
