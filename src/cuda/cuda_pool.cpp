// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "cuda/cuda_pool.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "api/try.hpp"
#include "cuda/cuda_status.hpp"

namespace kvtier {
namespace {

/// A non-blocking stream (nothing orders it after the legacy default stream: a transfer orders its
/// streams after the caller's itself) and a blocking-sync event: a host thread waiting on it sleeps
/// instead of spinning a core (CUDA's default wait spins while there are fewer contexts than
/// cores), and a restore's waits add up to a whole copy per request when few are in flight.
Status make_stream_and_event(cudaStream_t& stream, cudaEvent_t& event) {
  KVTIER_TRY(
      cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  return cuda_status(
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
      "cudaEventCreate");
}

}  // namespace

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  const size_t n = std::max<size_t>(bytes, 16);
  KVTIER_TRY(cuda_status(cudaMalloc(&b.ptr_, n), fmt::format("cudaMalloc({})", bytes)));
  b.bytes_ = n;
  return b;
}

void DeviceBuffer::reset() noexcept {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

CudaSlot::~CudaSlot() {
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (done != nullptr) cudaEventDestroy(done);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

CudaScratch::~CudaScratch() {
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (event != nullptr) cudaEventDestroy(event);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

CudaPool::~CudaPool() {
  // Freed on its own GPU, whichever thread closes the engine.
  cudaSetDevice(device_);
  slots_.clear();
  scratch_.clear();
  streams_.clear();
  if (rooms_ != nullptr) cudaMemPoolDestroy(rooms_);
}

Result<void*> CudaPool::allocate_room(size_t bytes, cudaStream_t stream) {
  cudaMemPool_t pool = nullptr;
  {
    std::lock_guard lock(mu_);
    if (rooms_ == nullptr) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device_;
      cudaMemPool_t made = nullptr;
      KVTIER_TRY(cuda_status(cudaMemPoolCreate(&made, &props), "cudaMemPoolCreate"));
      uint64_t kept = kRoomKeptBytes;
      const cudaError_t set = cudaMemPoolSetAttribute(made, cudaMemPoolAttrReleaseThreshold, &kept);
      if (set != cudaSuccess) {  // made again next time rather than kept returning all it frees
        cudaMemPoolDestroy(made);
        return fail(cuda_status(set, "cudaMemPoolSetAttribute"));
      }
      rooms_ = made;
    }
    pool = rooms_;
  }
  void* room = nullptr;
  const cudaError_t e = cudaMallocFromPoolAsync(&room, std::max<size_t>(bytes, 16), pool, stream);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it for the next call on this thread
    return fail(ErrorCode::kNotSupported,
                fmt::format("no room on GPU {} for {} bytes of coded records", device_, bytes));
  }
  KVTIER_TRY(cuda_status(e, fmt::format("cudaMallocFromPoolAsync({})", bytes)));
  return room;
}

Result<std::unique_ptr<CudaScratch>> CudaPool::take_stream() {
  {
    std::lock_guard lock(mu_);
    if (!streams_.empty()) {
      auto s = std::move(streams_.back());
      streams_.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<CudaScratch>();
  KVTIER_TRY(make_stream_and_event(s->stream, s->event));
  return s;
}

void CudaPool::put_stream(std::unique_ptr<CudaScratch> stream) {
  std::lock_guard lock(mu_);
  if (stream) streams_.push_back(std::move(stream));
}

void CudaPool::free_room(void* room, cudaStream_t stream) noexcept {
  if (room != nullptr) cudaFreeAsync(room, stream);
}

Result<std::vector<std::unique_ptr<CudaSlot>>> CudaPool::take_slots(size_t count, size_t bytes) {
  std::vector<std::unique_ptr<CudaSlot>> out;
  {
    std::lock_guard lock(mu_);
    while (out.size() < count && !slots_.empty()) {
      out.push_back(std::move(slots_.back()));
      slots_.pop_back();
    }
  }
  for (auto& s : out) {
    if (s->staging.size() < bytes) {  // the engine's slot size grew: a larger buffer
      s->staging.reset();
      KVTIER_ASSIGN_OR_RETURN(s->staging, DeviceBuffer::allocate(bytes));
    }
  }
  while (out.size() < count) {
    auto s = std::make_unique<CudaSlot>();
    KVTIER_TRY(make_stream_and_event(s->stream, s->done));
    KVTIER_ASSIGN_OR_RETURN(s->staging, DeviceBuffer::allocate(bytes));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::unique_ptr<CudaScratch>> CudaPool::take_scratch(size_t bytes) {
  std::unique_ptr<CudaScratch> s;
  {
    std::lock_guard lock(mu_);
    if (!scratch_.empty()) {
      s = std::move(scratch_.back());
      scratch_.pop_back();
    }
  }
  if (!s) {
    s = std::make_unique<CudaScratch>();
    KVTIER_TRY(make_stream_and_event(s->stream, s->event));
  }
  if (s->memory.size() < bytes) {
    s->memory.reset();
    // Room to grow: transfers of a few more records or blocks than this one reuse it as it is.
    KVTIER_ASSIGN_OR_RETURN(s->memory, DeviceBuffer::allocate(bytes + bytes / 2));
  }
  return s;
}

void CudaPool::put(std::vector<std::unique_ptr<CudaSlot>> slots,
                   std::unique_ptr<CudaScratch> scratch) {
  std::lock_guard lock(mu_);
  for (auto& s : slots) {
    if (s) slots_.push_back(std::move(s));
  }
  if (scratch) scratch_.push_back(std::move(scratch));
}

}  // namespace kvtier
