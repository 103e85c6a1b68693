// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The CUDA device: starts transfers (cuda_transfer.cpp) on each GPU's pool of streams, events and
// device staging; pins host staging; checks KV memory; allocates for cuFile.
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "api/try.hpp"
#include "cuda/cuda_status.hpp"
#include "cuda/cuda_transfer.hpp"
#include "device/device.hpp"

namespace kvtier {
namespace {

class CudaDevice final : public Device {
 public:
  std::string_view name() const override { return "cuda"; }
  bool accepts(MemoryKind kind) const override { return kind == MemoryKind::kCuda; }

  Result<std::unique_ptr<DeviceTransfer>> begin(const KvMemory& target, size_t records,
                                                size_t slots, size_t slot_bytes) override {
    return begin_cuda_transfer(pool_for(target.device), target, records, slots, slot_bytes);
  }

  Status make_current(int device) override {
    return cuda_status(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
  }

  Result<std::shared_ptr<std::byte>> allocate(int device, size_t bytes) override {
    KVTIER_TRY(make_current(device));
    void* p = nullptr;
    KVTIER_TRY(cuda_status(cudaMalloc(&p, bytes),
                           fmt::format("cudaMalloc({}) on CUDA device {}", bytes, device)));
    // Freed with its own device current, from whichever thread lets go of it last.
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [device](std::byte* q) {
      cudaSetDevice(device);
      cudaFree(q);
    });
  }

  Status register_staging(std::span<std::byte> memory) override {
    // Registered for the engine's lifetime, unregistered when it closes.
    return cuda_status(cudaHostRegister(memory.data(), memory.size(), cudaHostRegisterDefault),
                       "pinning staging memory (cudaHostRegister)");
  }

  void unregister_staging(std::span<std::byte> memory) noexcept override {
    cudaHostUnregister(memory.data());
  }

  Status check_shape(const KvLayoutParams& params) const override {
    return cuda_shape_supported(params);
  }

  Status check_memory(const MemoryView& view) const override {
    cudaPointerAttributes attr{};
    cudaError_t err = cudaPointerGetAttributes(&attr, view.data);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later calls are not blamed for it
      return cuda_status(err, "inspecting KV memory");
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      return {ErrorCode::kInvalidArgument, "KV memory marked as CUDA memory is not device memory"};
    }
    if (attr.device != view.device) {
      return {ErrorCode::kInvalidArgument,
              fmt::format("KV memory marked as on CUDA device {} lives on device {}", view.device,
                          attr.device)};
    }
    return {};
  }

 private:
  /// The pool of GPU `device`'s transfers, made on first use (kept for the engine's life: its
  /// streams and buffers are what later transfers reuse).
  CudaPool& pool_for(int device) {
    std::lock_guard lock(mu_);
    std::unique_ptr<CudaPool>& pool = pools_[device];
    if (!pool) pool = std::make_unique<CudaPool>(device);
    return *pool;
  }

  std::mutex mu_;
  std::map<int, std::unique_ptr<CudaPool>> pools_;  // guarded by mu_; entries never removed
};

}  // namespace

Result<std::unique_ptr<Device>> make_cuda_device() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return fail(cuda_status(err, "no usable CUDA device"));
  if (count == 0) return fail(ErrorCode::kNotSupported, "no CUDA device on this machine");
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>());
}

}  // namespace kvtier
