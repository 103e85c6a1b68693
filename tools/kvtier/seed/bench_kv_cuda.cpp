// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's KV cache in GPU memory.
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "api/try.hpp"
#include "bench_kernels.hpp"
#include "bench_kv.hpp"
#include "synthetic.hpp"

namespace kvtier::seed {
namespace {

// A CUDA error once a GPU is there (out of memory, say) is kDevice: --device auto falls back to
// host memory only where there is no GPU, never from a GPU run that failed.
Status cuda_ok(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return {};
  return {ErrorCode::kDevice, fmt::format("{}: {}", what, cudaGetErrorString(e)),
          static_cast<int>(e)};
}

class CudaBenchKv final : public BenchKv {
 public:
  ~CudaBenchKv() override {
    cudaSetDevice(gpu_);
    for (void* p : layers_) cudaFree(p);
    cudaFree(layer_ptrs_);
    cudaFree(table_dev_);
    cudaFree(ids_dev_);
    cudaFree(bad_dev_);
    cudaFree(scratch_);
    cudaFree(file_dev_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  static Result<std::unique_ptr<BenchKv>> create(const KvGeometry& g, uint64_t max_tokens, int gpu,
                                                 const KvSource& source) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      return fail(ErrorCode::kNotSupported, "no CUDA GPU on this machine");
    }
    std::unique_ptr<CudaBenchKv> kv(new CudaBenchKv);
    kv->gpu_ = gpu % count;
    KVTIER_TRY(cuda_ok(cudaSetDevice(kv->gpu_), "cudaSetDevice"));
    cudaDeviceProp prop{};
    KVTIER_TRY(cuda_ok(cudaGetDeviceProperties(&prop, kv->gpu_), "cudaGetDeviceProperties"));
    char bus[64] = {};
    KVTIER_TRY(cuda_ok(cudaDeviceGetPCIBusId(bus, sizeof(bus), kv->gpu_), "cudaDeviceGetPCIBusId"));
    kv->name_ = fmt::format("cuda:{} ({})", kv->gpu_, prop.name);
    kv->bus_ = bus;
    const uint32_t blocks =
        static_cast<uint32_t>((max_tokens + kBenchBlockSize - 1) / kBenchBlockSize);
    kv->layer_bytes_ = uint64_t{g.kv_tensors} * blocks * kBenchBlockSize * g.row_bytes();
    kv->table_ = shuffled_blocks(blocks);
    for (uint32_t l = 0; l < g.layers; ++l) {
      void* p = nullptr;
      KVTIER_TRY(cuda_ok(cudaMalloc(&p, kv->layer_bytes_), "allocating the paged KV cache"));
      kv->layers_.push_back(p);
      kv->view_.layers.push_back(
          {static_cast<std::byte*>(p), kv->layer_bytes_, MemoryKind::kCuda, kv->gpu_});
    }
    KVTIER_TRY(cuda_ok(cudaMalloc(&kv->layer_ptrs_, g.layers * sizeof(void*)), "cudaMalloc"));
    KVTIER_TRY(cuda_ok(cudaMemcpy(kv->layer_ptrs_, kv->layers_.data(), g.layers * sizeof(void*),
                                  cudaMemcpyHostToDevice),
                       "cudaMemcpy"));
    KVTIER_TRY(cuda_ok(cudaMalloc(&kv->table_dev_, blocks * sizeof(int32_t)), "cudaMalloc"));
    KVTIER_TRY(cuda_ok(cudaMemcpy(kv->table_dev_, kv->table_.data(), blocks * sizeof(int32_t),
                                  cudaMemcpyHostToDevice),
                       "cudaMemcpy"));
    KVTIER_TRY(
        cuda_ok(cudaMalloc(&kv->ids_dev_, uint64_t{blocks} * kBenchBlockSize * sizeof(int32_t)),
                "cudaMalloc"));
    KVTIER_TRY(cuda_ok(cudaMalloc(&kv->bad_dev_, sizeof(unsigned long long)), "cudaMalloc"));
    kv->cache_ = {static_cast<uint64_t* const*>(kv->layer_ptrs_),
                  kv->table_dev_,
                  g.layers,
                  blocks,
                  kBenchBlockSize,
                  static_cast<uint32_t>(g.row_bytes() / 8),
                  g.kv_tensors,
                  synthetic::first_word(g),
                  source.kind == KvSource::Kind::kBf16Like ? 1u : 0u,
                  nullptr,
                  {}};
    if (source.kind == KvSource::Kind::kFile) KVTIER_TRY(kv->upload_file(*source.file));
    kv->view_.block_table = kv->table_;
    kv->view_.block_size = kBenchBlockSize;
    kv->view_.num_blocks = blocks;
    kv->view_.layout = PagedLayout::kKvFirst;
    KVTIER_TRY(kv->poison());
    return std::unique_ptr<BenchKv>(std::move(kv));
  }

  std::string describe() const override { return name_; }
  std::string pci_bus_id() const override { return bus_; }
  const PagedKv& view() const override { return view_; }

  Status prefill(std::span<const Token> ids) override {
    KVTIER_TRY(upload(ids));
    KVTIER_TRY(
        cuda_ok(static_cast<cudaError_t>(cuda::launch_fill(cache_, ids_dev_, ids.size(), nullptr)),
                "prefill stand-in kernel"));
    return cuda_ok(cudaDeviceSynchronize(), "prefill stand-in kernel");
  }

  Status poison() override {
    KVTIER_TRY(cuda_ok(cudaSetDevice(gpu_), "cudaSetDevice"));
    for (void* p : layers_) KVTIER_TRY(cuda_ok(cudaMemset(p, 0xa5, layer_bytes_), "cudaMemset"));
    return cuda_ok(cudaDeviceSynchronize(), "cudaMemset");
  }

  Result<double> copy_ceiling(uint64_t bytes) override {
    constexpr uint64_t kPiece = uint64_t{256} << 20;
    KVTIER_TRY(cuda_ok(cudaSetDevice(gpu_), "cudaSetDevice"));
    if (pinned_ == nullptr) {
      KVTIER_TRY(cuda_ok(cudaHostAlloc(&pinned_, kPiece, cudaHostAllocDefault), "cudaHostAlloc"));
      std::memset(pinned_, 1, kPiece);
      KVTIER_TRY(cuda_ok(cudaMalloc(&scratch_, kPiece), "cudaMalloc"));
      KVTIER_TRY(
          cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
      KVTIER_TRY(
          cuda_ok(cudaMemcpy(scratch_, pinned_, kPiece, cudaMemcpyHostToDevice), "warm-up copy"));
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t done = 0; done < bytes; done += kPiece) {
      KVTIER_TRY(cuda_ok(cudaMemcpyAsync(scratch_, pinned_, std::min(kPiece, bytes - done),
                                         cudaMemcpyHostToDevice, stream_),
                         "pinned H2D copy"));
    }
    KVTIER_TRY(cuda_ok(cudaStreamSynchronize(stream_), "pinned H2D copy"));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::string copy_ceiling_name() const override {
    return "pinned host-to-device copy (cudaMemcpyAsync)";
  }

  Result<uint64_t> first_mismatch(std::span<const Token> ids) override {
    KVTIER_TRY(upload(ids));
    unsigned long long bad = ids.size();
    KVTIER_TRY(
        cuda_ok(cudaMemcpy(bad_dev_, &bad, sizeof(bad), cudaMemcpyHostToDevice), "cudaMemcpy"));
    KVTIER_TRY(cuda_ok(static_cast<cudaError_t>(
                           cuda::launch_check(cache_, ids_dev_, ids.size(), bad_dev_, nullptr)),
                       "check kernel"));
    KVTIER_TRY(
        cuda_ok(cudaMemcpy(&bad, bad_dev_, sizeof(bad), cudaMemcpyDeviceToHost), "check kernel"));
    return static_cast<uint64_t>(bad);
  }

 private:
  CudaBenchKv() = default;

  // The file's KV into GPU memory once, where the fill and check kernels read it. Each cache of a
  // rank holds its own copy: tens of MB for what forward_kv.py writes.
  Status upload_file(const KvFile& file) {
    KVTIER_TRY(cuda_ok(cudaMalloc(&file_dev_, file.bytes.size()), "allocating the KV file's copy"));
    KVTIER_TRY(
        cuda_ok(cudaMemcpy(file_dev_, file.bytes.data(), file.bytes.size(), cudaMemcpyHostToDevice),
                "uploading the KV file"));
    cache_.file_words = static_cast<const uint64_t*>(file_dev_);
    cache_.file = file.info.dims;
    return {};
  }

  Status upload(std::span<const Token> ids) {
    KVTIER_TRY(cuda_ok(cudaSetDevice(gpu_), "cudaSetDevice"));
    if (ids.size() > uint64_t{view_.num_blocks} * kBenchBlockSize) {
      return {ErrorCode::kInvalidArgument,
              fmt::format("bench KV: {} tokens do not fit the cache", ids.size())};
    }
    return cuda_ok(cudaMemcpy(ids_dev_, ids.data(), ids.size_bytes(), cudaMemcpyHostToDevice),
                   "uploading token ids");
  }

  int gpu_ = 0;
  std::string name_, bus_;
  uint64_t layer_bytes_ = 0;
  std::vector<int32_t> table_;
  std::vector<void*> layers_;
  void* layer_ptrs_ = nullptr;
  int32_t* table_dev_ = nullptr;
  int32_t* ids_dev_ = nullptr;
  unsigned long long* bad_dev_ = nullptr;
  void* pinned_ = nullptr;
  void* scratch_ = nullptr;
  void* file_dev_ = nullptr;  // the KV file's bytes (file KV only)
  cudaStream_t stream_ = nullptr;
  cuda::PagedCache cache_{};
  PagedKv view_;
};

}  // namespace

Result<std::unique_ptr<BenchKv>> make_cuda_bench_kv(const KvGeometry& g, uint64_t max_tokens,
                                                    int gpu, const KvSource& kv) {
  return CudaBenchKv::create(g, max_tokens, gpu, kv);
}

}  // namespace kvtier::seed
