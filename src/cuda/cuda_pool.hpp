// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The CUDA resources of one GPU's transfers (streams, events, device staging and scratch), made
// once and reused: cudaMalloc synchronizes with the device and stream creation is not free, so a
// restore takes what an earlier one handed back instead.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier {

/// Device memory owned by one pointer; freed without checking (destructors must not fail).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }
  /// At least `bytes` (16 at least) on the current device.
  [[nodiscard]] static Result<DeviceBuffer> allocate(size_t bytes);
  void reset() noexcept;
  template <typename T = uint8_t>
  [[nodiscard]] T* get() const {
    return static_cast<T*>(ptr_);
  }
  [[nodiscard]] size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// One staging slot of a transfer: its stream, the event the host waits on for it (blocking sync:
/// a waiting thread sleeps instead of spinning a core), and its device staging.
struct CudaSlot {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  DeviceBuffer staging;
  CudaSlot() = default;
  CudaSlot(const CudaSlot&) = delete;
  CudaSlot& operator=(const CudaSlot&) = delete;
  ~CudaSlot();
};

/// A transfer's own small device memory (checksum sums, layer pointers, block table), the stream it
/// is set up on, and an event for ordering after the caller's stream and for waiting.
struct CudaScratch {
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  DeviceBuffer memory;
  CudaScratch() = default;
  CudaScratch(const CudaScratch&) = delete;
  CudaScratch& operator=(const CudaScratch&) = delete;
  ~CudaScratch();
};

/// @brief The slots and scratch of one GPU's transfers, handed out and taken back. Grows to the
/// most that transfers hold at one time (the engine's staging pool bounds that) and frees it all
/// when destroyed (with the engine's CUDA device, never from a static destructor). Thread-safe.
class CudaPool {
 public:
  explicit CudaPool(int device) : device_(device) {}
  ~CudaPool();
  CudaPool(const CudaPool&) = delete;
  CudaPool& operator=(const CudaPool&) = delete;

  /// `count` slots with staging of at least `bytes` each, reused or made. The pool's GPU must be
  /// current on the calling thread.
  [[nodiscard]] Result<std::vector<std::unique_ptr<CudaSlot>>> take_slots(size_t count,
                                                                          size_t bytes);
  /// Scratch with at least `bytes` of memory, reused or made (GPU current, as above).
  [[nodiscard]] Result<std::unique_ptr<CudaScratch>> take_scratch(size_t bytes);
  /// Hands slots and scratch back. Each must be idle: its stream synchronized.
  void put(std::vector<std::unique_ptr<CudaSlot>> slots, std::unique_ptr<CudaScratch> scratch);

  /// A stream and its event with no memory (the one decoding a transfer's coded records), reused
  /// or made (GPU current); kept apart from the scratch, whose memory a transfer sizes.
  [[nodiscard]] Result<std::unique_ptr<CudaScratch>> take_stream();
  /// Hands one back; it must be idle.
  void put_stream(std::unique_ptr<CudaScratch> stream);

  /// `bytes` of device memory in order on `stream` (the room of a run of coded records), from a
  /// stream-ordered pool of the pool's own: freeing it waits for no other work of the GPU, and the
  /// pool keeps up to kRoomKeptBytes of freed memory for the next run instead of returning it.
  /// kNotSupported when the GPU has no room (the caller decodes on the host instead).
  [[nodiscard]] Result<void*> allocate_room(size_t bytes, cudaStream_t stream);
  /// Frees a room in order on `stream`, after the work queued there.
  void free_room(void* room, cudaStream_t stream) noexcept;
  static constexpr uint64_t kRoomKeptBytes = uint64_t{1} << 30;

 private:
  int device_;
  std::mutex mu_;
  std::vector<std::unique_ptr<CudaSlot>> slots_;       // guarded by mu_
  std::vector<std::unique_ptr<CudaScratch>> scratch_;  // guarded by mu_
  std::vector<std::unique_ptr<CudaScratch>> streams_;  // guarded by mu_
  cudaMemPool_t rooms_ = nullptr;                      // made at the first room; guarded by mu_
};

}  // namespace kvtier
