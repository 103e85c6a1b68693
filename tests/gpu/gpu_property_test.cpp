// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The property test's cases (tests/helpers/property_cases.hpp) through a real GPU: saves from host
// or device memory, restores into host or device memory, over O_DIRECT + bounce, the page cache,
// cuFile and the DRAM tier, contiguous and every paged layout; every restored byte compared.
// Device KV is written the way a serving engine writes it: by asynchronous work queued on a stream
// just before the call (a copy standing in for the prefill, a fill poisoning the destination), on
// the legacy default stream or on a non-blocking stream named in the call. kvtier must order its
// own copies after that work. Skipped without a CUDA device. Wide slice on the H200:
// KVTIER_PROPERTY_CASES=600 KVTIER_PROPERTY_MAX_MB=256.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "have_gpu.hpp"
#include "paged_reference.hpp"
#include "property_cases.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::HostKv;
using testing::PagedHost;
using testing::PropertyCase;

/// Device memory holding `bytes`, with a pristine copy to refill it from asynchronously.
struct DeviceCopy {
  explicit DeviceCopy(std::span<const std::byte> host) : bytes(host.size()) {
    EXPECT_EQ(cudaMalloc(&live, bytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&pristine, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(pristine, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DeviceCopy(uint64_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&live, bytes), cudaSuccess); }
  ~DeviceCopy() {
    cudaFree(live);
    cudaFree(pristine);
  }
  /// Queued, not waited for: the call that follows must order after it.
  void refill(cudaStream_t s) const {
    cudaMemsetAsync(live, 0, bytes, s);
    cudaMemcpyAsync(live, pristine, bytes, cudaMemcpyDeviceToDevice, s);
  }
  void poison(cudaStream_t s) const { cudaMemsetAsync(live, 0xEE, bytes, s); }
  void download(std::span<std::byte> host) const {
    ASSERT_EQ(cudaMemcpy(host.data(), live, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  [[nodiscard]] MemoryView view() const {
    return {static_cast<std::byte*>(live), bytes, MemoryKind::kCuda, 0};
  }
  uint64_t bytes;
  void* live = nullptr;
  void* pristine = nullptr;
};

/// A paged cache whose layers are either the host reference's vectors or device copies of them.
struct Paged {
  Paged(const KvGeometry& g, uint32_t blocks, const PropertyCase& c, bool device)
      : host(g, blocks, c.block_size, c.layout), on_device(device) {}
  /// Makes the view point at device copies of the host layers (after the host was filled).
  void to_device() {
    host.view.layers.clear();
    for (auto& l : host.layers) {
      layers.push_back(std::make_unique<DeviceCopy>(l));
      host.view.layers.push_back(layers.back()->view());
    }
  }
  void download() {
    for (size_t l = 0; l < layers.size(); ++l) layers[l]->download(host.layers[l]);
  }
  PagedHost host;
  bool on_device;
  std::vector<std::unique_ptr<DeviceCopy>> layers;
};

/// What a case ended as, for the run's tally.
enum class Outcome { kRoundTrip, kRefusedShape, kInvalidGeometry };

void run_case(const PropertyCase& c, cudaStream_t caller, Outcome& outcome) {
  outcome = Outcome::kRoundTrip;
  testing::TempDir dir;
  auto opened = Engine::open(testing::property_options(c, dir.str()));
  if (!c.valid) {
    outcome = Outcome::kInvalidGeometry;
    ASSERT_FALSE(opened);
    EXPECT_EQ(opened.error().code(), ErrorCode::kInvalidArgument);
    return;
  }
  ASSERT_OK(opened);
  Engine& e = **opened;
  const KvGeometry& g = c.g;
  // The GPU kernels move 16-byte vectors: other rows are refused with a clear error, not mangled.
  const bool gpu_shape =
      g.row_bytes() % 16 == 0 && (uint64_t{g.head_dim} * g.element_bytes) % 16 == 0;
  const std::vector<Token> tokens = synthetic::tokens(c.index + 1, c.tokens);
  HostKv source(g, c.capacity);
  synthetic::fill_kv(g, tokens, source.span(), c.capacity);
  void* stream = caller;  // null: the legacy default stream

  auto expect_refused = [&](const auto& result) {
    outcome = Outcome::kRefusedShape;
    ASSERT_FALSE(result) << "a row of " << g.row_bytes() << " bytes was accepted on the GPU";
    EXPECT_EQ(result.error().code(), ErrorCode::kNotSupported) << result.error().to_string();
  };

  // Save (the first half first, when the case says so).
  const uint32_t save_blocks =
      static_cast<uint32_t>((c.tokens + c.block_size - 1) / c.block_size) + 3;
  const auto save_table = testing::shuffled_blocks(c.tokens, c.block_size, save_blocks, c.index);
  std::unique_ptr<DeviceCopy> src;
  std::unique_ptr<Paged> paged_src;
  if (!c.paged) {
    if (c.src_device) src = std::make_unique<DeviceCopy>(source.span());
  } else {
    paged_src = std::make_unique<Paged>(g, save_blocks, c, c.src_device);
    testing::move_all(g, paged_src->host, save_table, source.data.get(), c.capacity, c.tokens,
                      true);
    if (c.src_device) paged_src->to_device();
  }
  auto save = [&](std::span<const Token> t) -> Result<SaveResult> {
    if (!c.paged) {
      if (!c.src_device) return e.save(t, source.view);
      src->refill(caller);
      ChunkedKv kv{src->view(), c.capacity, stream};
      return e.save(t, kv);
    }
    PagedKv kv = paged_src->host.view;
    const uint32_t blocks = static_cast<uint32_t>((t.size() + c.block_size - 1) / c.block_size);
    kv.block_table = std::span(save_table).first(blocks);
    if (c.src_device) {
      for (auto& l : paged_src->layers) l->refill(caller);
      kv.cuda_stream = stream;
    }
    return e.save(t, kv);
  };
  if (c.src_device && !gpu_shape) return expect_refused(save(tokens));
  if (c.prefix_first) {
    ASSERT_OK(save(std::span(tokens).first(c.tokens / 2)));
  }
  ASSERT_OK(save(tokens));

  // Restore into other memory (other blocks, for paged), poisoned just before.
  HostKv back(g, c.capacity);
  Result<RestoreResult> r;
  if (!c.paged) {
    if (!c.dst_device) {
      r = e.restore(tokens, back.view);
    } else {
      DeviceCopy dst(back.bytes);
      dst.poison(caller);
      r = e.restore(tokens, ChunkedKv{dst.view(), c.capacity, stream});
      if (!gpu_shape) return expect_refused(r);
      dst.download(back.span());
    }
  } else {
    const uint32_t blocks = static_cast<uint32_t>((c.tokens + c.block_size - 1) / c.block_size) + 5;
    const auto table = testing::shuffled_blocks(c.tokens, c.block_size, blocks, c.index + 99);
    Paged dst(g, blocks, c, c.dst_device);
    if (c.dst_device) {
      dst.to_device();
      for (auto& l : dst.layers) l->poison(caller);
      dst.host.view.cuda_stream = stream;
    }
    dst.host.view.block_table = table;
    r = e.restore(tokens, dst.host.view);
    if (c.dst_device && !gpu_shape) return expect_refused(r);
    if (c.dst_device) dst.download();
    testing::move_all(g, dst.host, table, back.data.get(), c.capacity, c.tokens, false);
  }
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, c.tokens) << r->problem;
  EXPECT_EQ(r->checksum_misses, 0u) << "valid records dropped";
  EXPECT_EQ(r->recheck_kept, 0u)
      << "a valid record failed its check on the data path (kept by the re-read)";
  EXPECT_EQ(synthetic::first_mismatch(g, tokens, back.span(), c.capacity), c.tokens)
      << "restored bytes differ";
}

TEST(GpuPropertyTest, EveryDrawnCaseRoundTripsByteExactThroughTheGpu) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = testing::test_seed();
  testing::PropertyLimits base;
  base.gpu = true;
  const testing::PropertyLimits lim = testing::property_limits(base);
  const int64_t only = testing::property_only_case();
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  uint64_t ran = 0;
  std::map<std::string, uint64_t> tally;  // what the run covered, printed at the end
  for (uint64_t i = 0; i < lim.cases; ++i) {
    if (only >= 0 && static_cast<uint64_t>(only) != i) continue;
    const PropertyCase c = testing::draw_case(seed, i, lim);
    // Odd cases queue the caller's work on a non-blocking stream and name it; even ones use the
    // legacy default stream and name none.
    cudaStream_t caller = i % 2 == 1 ? side : nullptr;
    SCOPED_TRACE(c.describe() +
                 (caller ? " | caller stream: non-blocking" : " | caller stream: legacy") +
                 fmt::format(" | replay: KVTIER_TEST_SEED={} KVTIER_PROPERTY_CASE={}", seed, i));
    Outcome outcome = Outcome::kRoundTrip;
    run_case(c, caller, outcome);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ++ran;
    if (outcome == Outcome::kInvalidGeometry) {
      ++tally["geometry refused at open"];
    } else if (outcome == Outcome::kRefusedShape) {
      ++tally["shape refused on the GPU"];
    } else {
      ++tally[fmt::format("io {}{}", io_path_name(c.io), c.dram ? "+dram" : "")];
      ++tally[c.paged ? fmt::format("paged layout {}", static_cast<int>(c.layout))
                      : std::string("contiguous")];
      ++tally[fmt::format("src {} -> dst {}", c.src_device ? "device" : "host",
                          c.dst_device ? "device" : "host")];
      tally["bytes round-tripped (MiB)"] += c.g.bytes_for_tokens(c.tokens) >> 20;
      tally["largest case (tokens)"] = std::max(tally["largest case (tokens)"], c.tokens);
    }
    if (::testing::Test::HasFatalFailure()) break;
  }
  cudaStreamDestroy(side);
  std::printf("gpu property cases run: %llu\n", static_cast<unsigned long long>(ran));
  for (const auto& [what, n] : tally)
    std::printf("  %s: %llu\n", what.c_str(), static_cast<unsigned long long>(n));
}

}  // namespace
}  // namespace kvtier
