// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The CUDA device: H2D copies from pinned staging on one stream per slot, then the scatter kernel
// (which also checksums) from device staging into the caller's KV memory.
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include <fmt/format.h>

#include "common/try.hpp"
#include "cuda/cuda_status.hpp"
#include "cuda/kernels.hpp"
#include "device/device.hpp"

namespace kvtier {
namespace {

/// Device memory owned by one pointer; freed without checking (destructors must not fail).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }
  static Result<DeviceBuffer> allocate(size_t bytes) {
    DeviceBuffer b;
    KVTIER_TRY(cuda_status(cudaMalloc(&b.ptr_, std::max<size_t>(bytes, 16)),
                           fmt::format("cudaMalloc({})", bytes)));
    return b;
  }
  void reset() noexcept {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
  }
  template <typename T = uint8_t>
  [[nodiscard]] T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

/// The kernels move 16-byte vectors and index tokens with 32-bit arithmetic.
Status shape_supported(const KvLayoutParams& p) {
  if (p.row_bytes % 16 != 0 || p.head_bytes % 16 != 0) {
    return {ErrorCode::kNotSupported, fmt::format("KV in GPU memory needs heads of a multiple of "
                                                  "16 bytes (this geometry's head is {} bytes, "
                                                  "its row {}); keep such KV in host memory",
                                                  p.head_bytes, p.row_bytes)};
  }
  if (p.capacity_tokens >= (uint64_t{1} << 31)) {
    return {ErrorCode::kNotSupported,
            "KV in GPU memory is limited to targets of fewer than 2^31 tokens"};
  }
  return {};
}

/// One slot's stream, completion event and device staging.
struct SlotResources {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  DeviceBuffer staging;
  bool pending = false;
};

class CudaTransfer final : public DeviceTransfer {
 public:
  static Result<std::unique_ptr<CudaTransfer>> create(const KvTarget& target, size_t records,
                                                      size_t slots, size_t slot_bytes) {
    auto t = std::unique_ptr<CudaTransfer>(new CudaTransfer());
    t->device_ = target.device;
    KVTIER_TRY(t->select());
    t->params_ = target.params;
    KVTIER_TRY(shape_supported(t->params_));
    // Every slot's stream is non-blocking, so nothing orders them after work on the legacy default
    // stream: a plain cudaMemcpy from pageable memory may return before its DMA lands, and a kernel
    // on a slot stream would then read half-written layer pointers (seen under 8 concurrent
    // restores: illegal address). Set up on a stream of our own and wait for it.
    cudaStream_t setup = nullptr;
    KVTIER_TRY(
        cuda_status(cudaStreamCreateWithFlags(&setup, cudaStreamNonBlocking), "cudaStreamCreate"));
    auto setup_done = [&](Status st) {
      if (st.ok()) st = cuda_status(cudaStreamSynchronize(setup), "setting up a transfer");
      cudaStreamDestroy(setup);
      return st;
    };
    Status st = [&]() -> Status {
      KVTIER_ASSIGN_OR_RETURN(t->sums_, DeviceBuffer::allocate(std::max<size_t>(records, 1) * 8));
      KVTIER_TRY(
          cuda_status(cudaMemsetAsync(t->sums_.get(), 0, std::max<size_t>(records, 1) * 8, setup),
                      "cudaMemsetAsync"));
      t->records_ = records;
      if (!target.layer_base.empty()) {
        KVTIER_ASSIGN_OR_RETURN(
            t->layer_base_, DeviceBuffer::allocate(target.layer_base.size() * sizeof(uint8_t*)));
        KVTIER_TRY(cuda_status(cudaMemcpyAsync(t->layer_base_.get(), target.layer_base.data(),
                                               target.layer_base.size() * sizeof(uint8_t*),
                                               cudaMemcpyHostToDevice, setup),
                               "copying layer pointers"));
        KVTIER_ASSIGN_OR_RETURN(
            t->block_table_, DeviceBuffer::allocate(target.block_table.size() * sizeof(int32_t)));
        KVTIER_TRY(cuda_status(cudaMemcpyAsync(t->block_table_.get(), target.block_table.data(),
                                               target.block_table.size() * sizeof(int32_t),
                                               cudaMemcpyHostToDevice, setup),
                               "copying the block table"));
        t->params_.layer_base = t->layer_base_.get<uint8_t*>();
        t->params_.block_table = t->block_table_.get<int32_t>();
      }
      return {};
    }();
    KVTIER_TRY(setup_done(st));
    t->slots_.resize(slots);
    for (SlotResources& s : t->slots_) {
      KVTIER_TRY(cuda_status(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
                             "cudaStreamCreate"));
      // Blocking sync: a host thread waiting for a slot's copy sleeps instead of spinning a core
      // (CUDA's default wait spins while there are fewer contexts than cores), and a restore's
      // waits add up to a whole copy per request when few requests are in flight.
      KVTIER_TRY(cuda_status(
          cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming | cudaEventBlockingSync),
          "cudaEventCreate"));
      KVTIER_ASSIGN_OR_RETURN(s.staging, DeviceBuffer::allocate(slot_bytes));
    }
    KVTIER_TRY(t->order_after(target.stream));
    return t;
  }

  /// Makes every slot stream wait for the work the caller queued on `caller` before this call.
  /// The slot streams are non-blocking: nothing else orders them after a kernel still writing the
  /// KV a save reads (its checksum would be of half-written bytes, and the record later dropped as
  /// corrupt), or after a pending fill of a restore's destination (it would overwrite the KV).
  Status order_after(void* caller) {
    cudaEvent_t ready = nullptr;
    KVTIER_TRY(
        cuda_status(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate"));
    cudaStream_t stream = caller == nullptr ? cudaStreamLegacy : static_cast<cudaStream_t>(caller);
    Status st = cuda_status(cudaEventRecord(ready, stream), "recording the caller's stream");
    for (SlotResources& s : slots_) {
      if (st.ok())
        st = cuda_status(cudaStreamWaitEvent(s.stream, ready, 0),
                         "ordering after the caller's stream");
    }
    cudaEventDestroy(ready);  // released once the device has passed it
    return st;
  }

  ~CudaTransfer() override {
    (void)select();
    for (SlotResources& s : slots_) {
      if (s.stream != nullptr) cudaStreamSynchronize(s.stream);
      if (s.done != nullptr) cudaEventDestroy(s.done);
      if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    }
  }

  Status scatter(size_t slot, std::span<const std::byte> piece,
                 std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    SlotResources& s = slots_[slot];
    // Only payload bytes cross to the GPU (headers were checked on the host): host traffic stays at
    // one DMA in from storage and one DMA out per payload byte.
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(cuda_status(
          cudaMemcpyAsync(s.staging.get() + span.piece_offset, piece.data() + span.piece_offset,
                          span.bytes, cudaMemcpyHostToDevice, s.stream),
          "H2D copy of a staging piece"));
      copied_ += span.bytes;
    }
    std::vector<cuda::ScatterJob> jobs;
    for (const PieceSpan& span : spans) jobs.push_back({s.staging.get() + span.piece_offset, span});
    KVTIER_TRY(cuda_status(cuda::launch_scatter(jobs.data(), jobs.size(), params_,
                                                sums_.get<unsigned long long>(), s.stream),
                           "scatter kernel"));
    KVTIER_TRY(cuda_status(cudaEventRecord(s.done, s.stream), "cudaEventRecord"));
    s.pending = true;
    return {};
  }

  Status scatter_device(size_t slot, const std::byte* device_piece,
                        std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    SlotResources& s = slots_[slot];
    std::vector<cuda::ScatterJob> jobs;
    for (const PieceSpan& span : spans) {
      jobs.push_back({reinterpret_cast<const uint8_t*>(device_piece) + span.piece_offset, span});
    }
    KVTIER_TRY(cuda_status(cuda::launch_scatter(jobs.data(), jobs.size(), params_,
                                                sums_.get<unsigned long long>(), s.stream),
                           "scatter kernel"));
    KVTIER_TRY(cuda_status(cudaEventRecord(s.done, s.stream), "cudaEventRecord"));
    s.pending = true;
    return {};
  }

  Status read_device(size_t slot, const std::byte* device_src, std::span<std::byte> host) override {
    KVTIER_TRY(select());
    SlotResources& s = slots_[slot];
    KVTIER_TRY(cuda_status(
        cudaMemcpyAsync(host.data(), device_src, host.size(), cudaMemcpyDeviceToHost, s.stream),
        "D2H copy of a record header"));
    copied_ += host.size();
    return cuda_status(cudaStreamSynchronize(s.stream), "D2H copy of a record header");
  }

  Status gather(size_t slot, std::span<std::byte> piece,
                std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    SlotResources& s = slots_[slot];
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(cuda_status(
          cuda::launch_gather(s.staging.get() + span.piece_offset, span, params_, s.stream),
          "gather kernel"));
      KVTIER_TRY(cuda_status(
          cudaMemcpyAsync(piece.data() + span.piece_offset, s.staging.get() + span.piece_offset,
                          span.bytes, cudaMemcpyDeviceToHost, s.stream),
          "D2H copy of a staging piece"));
      copied_ += span.bytes;
    }
    return cuda_status(cudaStreamSynchronize(s.stream), "gather");
  }

  Status stage_device(size_t slot, std::byte* device_piece, std::span<const PieceSpan> spans,
                      std::span<const std::pair<uint64_t, std::span<const std::byte>>> host_parts,
                      std::span<const std::pair<uint64_t, uint64_t>> zero_parts) override {
    KVTIER_TRY(select());
    SlotResources& s = slots_[slot];
    auto* dst = reinterpret_cast<uint8_t*>(device_piece);
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(cuda_status(cuda::launch_gather(dst + span.piece_offset, span, params_, s.stream),
                             "gather kernel"));
    }
    for (const auto& [at, bytes] : host_parts) {
      KVTIER_TRY(cuda_status(
          cudaMemcpyAsync(dst + at, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s.stream),
          "H2D copy of a record header"));
      copied_ += bytes.size();
    }
    for (const auto& [at, n] : zero_parts) {
      KVTIER_TRY(cuda_status(cudaMemsetAsync(dst + at, 0, n, s.stream), "clearing record padding"));
    }
    return cuda_status(cudaStreamSynchronize(s.stream), "staging a piece in device memory");
  }

  Status release(size_t slot) override {
    SlotResources& s = slots_[slot];
    if (!s.pending) return {};
    KVTIER_TRY(select());
    s.pending = false;
    return cuda_status(cudaEventSynchronize(s.done), "waiting for a staging slot's copy");
  }

  Result<std::vector<uint64_t>> finish() override {
    KVTIER_TRY(select());
    for (size_t i = 0; i < slots_.size(); ++i) KVTIER_TRY(release(i));
    std::vector<uint64_t> out(records_);
    KVTIER_TRY(cuda_status(
        cudaMemcpy(out.data(), sums_.get(), records_ * 8, cudaMemcpyDeviceToHost), "reading sums"));
    return out;
  }

  Result<std::vector<uint64_t>> record_sums(std::span<const RecordRange> records) override {
    KVTIER_TRY(select());
    KVTIER_ASSIGN_OR_RETURN(DeviceBuffer sums,
                            DeviceBuffer::allocate(std::max<size_t>(records.size(), 1) * 8));
    cudaStream_t stream = slots_.empty() ? nullptr : slots_[0].stream;
    KVTIER_TRY(
        cuda_status(cudaMemsetAsync(sums.get(), 0, records.size() * 8, stream), "cudaMemset"));
    for (size_t i = 0; i < records.size(); ++i) {
      KVTIER_TRY(
          cuda_status(cuda::launch_record_sum(records[i].first_token, records[i].token_count,
                                              params_, sums.get<unsigned long long>() + i, stream),
                      "checksum kernel"));
    }
    std::vector<uint64_t> out(records.size());
    KVTIER_TRY(cuda_status(
        cudaMemcpyAsync(out.data(), sums.get(), records.size() * 8, cudaMemcpyDeviceToHost, stream),
        "reading sums"));
    KVTIER_TRY(cuda_status(cudaStreamSynchronize(stream), "checksum kernel"));
    return out;
  }

  uint64_t device_copy_bytes() const override { return copied_; }

 private:
  CudaTransfer() = default;
  // Worker threads call in: the current device is per thread.
  Status select() const {
    return cuda_status(cudaSetDevice(device_), fmt::format("cudaSetDevice({})", device_));
  }

  int device_ = 0;
  KvLayoutParams params_;
  size_t records_ = 0;
  DeviceBuffer sums_;
  DeviceBuffer layer_base_;
  DeviceBuffer block_table_;
  std::vector<SlotResources> slots_;
  std::atomic<uint64_t> copied_{0};
};

class CudaDevice final : public Device {
 public:
  std::string_view name() const override { return "cuda"; }
  bool accepts(MemoryKind kind) const override { return kind == MemoryKind::kCuda; }

  Result<std::unique_ptr<DeviceTransfer>> begin(const KvTarget& target, size_t records,
                                                size_t slots, size_t slot_bytes) override {
    KVTIER_ASSIGN_OR_RETURN(auto t, CudaTransfer::create(target, records, slots, slot_bytes));
    return std::unique_ptr<DeviceTransfer>(std::move(t));
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
    return shape_supported(params);
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
};

}  // namespace

Result<std::unique_ptr<Device>> make_cuda_device_impl() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return fail(cuda_status(err, "no usable CUDA device"));
  if (count == 0) return fail(ErrorCode::kNotSupported, "no CUDA device on this machine");
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>());
}

}  // namespace kvtier
