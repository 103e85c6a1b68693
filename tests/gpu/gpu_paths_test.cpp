// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The GPU data path on a real CUDA device: saves from and restores into device memory, contiguous
// and paged, cross-checked with the host path (each verifies checksums the other computed).
// Skipped where there is no CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fault_engine.hpp"
#include "have_gpu.hpp"
#include "paged_reference.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device"

/// Device memory with a host mirror.
struct GpuBuffer {
  explicit GpuBuffer(uint64_t bytes) : size(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr, 0xEE, bytes), cudaSuccess);  // poison: every byte must be written
  }
  ~GpuBuffer() { cudaFree(ptr); }
  void upload(std::span<const std::byte> host) {
    ASSERT_EQ(cudaMemcpy(ptr, host.data(), size, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download(std::span<std::byte> host) const {
    ASSERT_EQ(cudaMemcpy(host.data(), ptr, size, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  MemoryView view() const { return {static_cast<std::byte*>(ptr), size, MemoryKind::kCuda, 0}; }
  void* ptr = nullptr;
  uint64_t size;
};

/// A paged KV cache on the GPU shaped like a host reference, with the reference's block table.
struct GpuPaged {
  GpuPaged(uint32_t layer_count, const testing::PagedHost& reference,
           std::span<const int32_t> table)
      : view(reference.view) {
    view.block_table = table;
    view.layers.clear();
    for (uint32_t l = 0; l < layer_count; ++l) {
      layers.push_back(std::make_unique<GpuBuffer>(reference.layer_bytes));
      view.layers.push_back(layers.back()->view());
    }
  }
  void download(testing::PagedHost& reference) const {
    for (size_t l = 0; l < layers.size(); ++l) layers[l]->download(reference.layers[l]);
  }
  void upload(const testing::PagedHost& reference) {
    for (size_t l = 0; l < layers.size(); ++l) layers[l]->upload(reference.layers[l]);
  }
  std::vector<std::unique_ptr<GpuBuffer>> layers;
  PagedKv view;
};

class GpuPathTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> open() {
    auto e = Engine::open(testing::small_options(dir_.str(), g_));
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry(64);
};

TEST_F(GpuPathTest, SaveFromGpuRestoreIntoGpuIsByteExact) {
  SKIP_WITHOUT_GPU();
  auto e = open();
  for (uint64_t n : {1u, 64u, 1000u, 20000u}) {
    auto tokens = synthetic::tokens(n, n);
    testing::HostKv host(g_, n);
    synthetic::fill_kv(g_, tokens, host.span(), n);
    GpuBuffer src(host.bytes), dst(host.bytes);
    src.upload(host.span());
    ASSERT_OK(e->save(tokens, ChunkedKv{src.view(), n}));
    auto r = e->restore(tokens, ChunkedKv{dst.view(), n});
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, n);
    // The bounce path's host traffic: the drive's DMA into staging, the DMA out to the GPU.
    EXPECT_EQ(r->host_bytes, r->bytes_read + host.bytes) << n;
    testing::HostKv back(g_, n);
    dst.download(back.span());
    EXPECT_EQ(synthetic::first_mismatch(g_, tokens, back.span(), n), n) << n;
  }
  EXPECT_GT(e->stats().device_copy_bytes, 0u);
}

TEST_F(GpuPathTest, GpuAndHostChecksumsAreBitIdentical) {
  SKIP_WITHOUT_GPU();
  auto e = open();
  const uint64_t n = 3000;
  auto a = synthetic::tokens(1, n), b = synthetic::tokens(2, n);
  testing::HostKv host_a(g_, n), host_b(g_, n);
  synthetic::fill_kv(g_, a, host_a.span(), n);
  synthetic::fill_kv(g_, b, host_b.span(), n);
  GpuBuffer gpu_a(host_a.bytes), gpu_out(host_a.bytes);
  gpu_a.upload(host_a.span());
  ASSERT_OK(e->save(a, ChunkedKv{gpu_a.view(), n}));  // checksums computed by the GPU kernel
  ASSERT_OK(e->save(b, host_b.view));                 // checksums computed on the host
  testing::HostKv out(g_, n);
  auto ra = e->restore(a, out.view);  // verified on the host
  ASSERT_OK(ra);
  EXPECT_EQ(ra->tokens_restored, n);
  EXPECT_EQ(ra->checksum_misses, 0u);
  auto rb = e->restore(b, ChunkedKv{gpu_out.view(), n});  // verified on the GPU
  ASSERT_OK(rb);
  EXPECT_EQ(rb->tokens_restored, n);
  EXPECT_EQ(rb->checksum_misses, 0u);
}

// Every layout over every path into GPU memory: O_DIRECT + bounce, the page cache + bounce, cuFile
// (reads and writes), and DRAM-tier hits; each restore checked against an independent reference of
// the layout.
TEST_F(GpuPathTest, EveryPagedLayoutRoundTripsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  struct Path {
    const char* name;
    IoPath io;
    uint64_t dram_bytes;
  };
  const char* expect_gds = std::getenv("KVTIER_TEST_EXPECT_GDS");
  for (const Path& path :
       {Path{"direct", IoPath::kDirect, 0}, Path{"buffered", IoPath::kBuffered, 0},
        Path{"gds", IoPath::kGds, 0}, Path{"dram", IoPath::kDirect, 64 << 20}})
    for (PagedLayout layout : {PagedLayout::kKvFirst, PagedLayout::kBlockFirst,
                               PagedLayout::kPackedHeads, PagedLayout::kPackedTokens}) {
      SCOPED_TRACE(std::string(path.name) + " layout " + std::to_string(static_cast<int>(layout)));
      testing::TempDir dir;
      Options o = testing::small_options(dir.str(), g_);
      o.io_path = path.io;
      o.dram_bytes = path.dram_bytes;
      auto e = Engine::open(o);
      ASSERT_OK(e);
      const uint64_t n = 1000;
      auto tokens = synthetic::tokens(9, n);
      testing::HostKv host(g_, n);
      synthetic::fill_kv(g_, tokens, host.span(), n);
      ASSERT_OK((*e)->save(tokens, host.view));
      testing::PagedHost reference(g_, 80, 16, layout);
      auto table = testing::shuffled_blocks(n, 16, 80, testing::test_seed());
      GpuPaged gpu(g_.layers, reference, table);
      auto r = (*e)->restore(tokens, gpu.view);
      ASSERT_OK(r);
      EXPECT_EQ(r->tokens_restored, n);
      gpu.download(reference);
      testing::HostKv back(g_, n);
      testing::move_all(g_, reference, table, back.data.get(), n, n, /*to_paged=*/false);
      EXPECT_EQ(synthetic::first_mismatch(g_, tokens, back.span(), n), n)
          << static_cast<int>(layout);
      // And back: save from the GPU's paged tensors under new tokens, restore on the host.
      auto tokens2 = synthetic::tokens(10, n);
      testing::HostKv host2(g_, n);
      synthetic::fill_kv(g_, tokens2, host2.span(), n);
      testing::move_all(g_, reference, table, host2.data.get(), n, n, /*to_paged=*/true);
      gpu.upload(reference);
      ASSERT_OK((*e)->save(tokens2, gpu.view));
      testing::HostKv out(g_, n);
      auto r2 = (*e)->restore(tokens2, out.view);
      ASSERT_OK(r2);
      EXPECT_EQ(r2->tokens_restored, n);
      EXPECT_EQ(synthetic::first_mismatch(g_, tokens2, out.span(), n), n)
          << static_cast<int>(layout);
      const Stats st = (*e)->stats();
      if (path.dram_bytes > 0) {
        EXPECT_GT(st.dram_hits, 0u);
      }
      if (path.io == IoPath::kGds && expect_gds != nullptr && std::string(expect_gds) == "used") {
        EXPECT_EQ(st.gds_restores, 1u);  // the GPU restore (the host one reads the POSIX way)
        EXPECT_EQ(st.gds_saves, 1u);     // the save from the GPU's paged tensors
        std::printf("gds paged layout %d: %s\n", static_cast<int>(layout),
                    st.gds_io_counts.c_str());
      }
    }
}

TEST_F(GpuPathTest, SkippedBlocksAreNotWrittenOnTheGpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [name, io, dram] : {std::tuple{"direct", IoPath::kDirect, uint64_t{0}},
                                       std::tuple{"gds", IoPath::kGds, uint64_t{0}},
                                       std::tuple{"dram", IoPath::kDirect, uint64_t{64} << 20}}) {
    SCOPED_TRACE(name);
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g_);
    o.io_path = io;
    o.dram_bytes = dram;
    auto e = Engine::open(o);
    ASSERT_OK(e);
    const uint64_t n = 600;  // the first 160 tokens (10 blocks) are the serving engine's already
    auto tokens = synthetic::tokens(11, n);
    testing::HostKv host(g_, n);
    synthetic::fill_kv(g_, tokens, host.span(), n);
    ASSERT_OK((*e)->save(tokens, host.view));
    testing::PagedHost reference(g_, 64, 16, PagedLayout::kPackedHeads);  // every byte 0xEE
    const auto placed = testing::shuffled_blocks(n, 16, 64, testing::test_seed() + 5);
    std::vector<int32_t> table = placed;
    for (size_t b = 0; b < 10; ++b) table[b] = kSkipBlock;
    GpuPaged gpu(g_.layers, reference, table);
    gpu.upload(reference);
    auto r = (*e)->restore(tokens, gpu.view);
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, n);
    EXPECT_EQ(r->checksum_misses, 0u);
    gpu.download(reference);
    testing::HostKv back(g_, n);
    testing::move_all(g_, reference, placed, back.data.get(), n, n, /*to_paged=*/false);
    EXPECT_TRUE(testing::restored_except_skipped(g_, back.data.get(), host.data.get(), n, 160));
  }
}

TEST_F(GpuPathTest, CorruptRecordIsAMissOnTheGpuPath) {
  SKIP_WITHOUT_GPU();
  const uint64_t n = 640;  // ten chunks of 64
  auto tokens = synthetic::tokens(3, n);
  {
    auto e = open();
    testing::HostKv host(g_, n);
    synthetic::fill_kv(g_, tokens, host.span(), n);
    ASSERT_OK(e->save(tokens, host.view));
  }
  const uint64_t record = 4096 + 64 * 1024;
  for (auto& f : std::filesystem::directory_iterator(dir_.path() / "rank0of1")) {
    if (f.path().extension() != ".kvt") continue;
    std::fstream s(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(static_cast<std::streamoff>(6 * record + 4096 + 1000));
    s.put('\x42');
  }
  auto e = open();
  testing::HostKv host(g_, n);
  GpuBuffer dst(host.bytes);
  auto r = e->restore(tokens, ChunkedKv{dst.view(), n});
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, 6u * 64);
  EXPECT_EQ(r->checksum_misses, 1u);
  // Damaged on disk: it failed its re-read too, and only then was it dropped.
  EXPECT_EQ(e->stats().recheck_dropped, 1u);
  EXPECT_EQ(e->stats().recheck_kept, 0u);
  dst.download(host.span());
  EXPECT_EQ(synthetic::first_mismatch(g_, std::span(tokens).first(6 * 64), host.span(), n),
            6u * 64);
}

// Re-read before drop on the GPU path: a read corrupted once on its way into staging fails its
// check where it lands, is re-read through the page cache, verified on the host and placed again:
// kept and served.
TEST_F(GpuPathTest, ReadCorruptedOnceIsKeptAndServedOnTheGpuPath) {
  SKIP_WITHOUT_GPU();
  const uint64_t n = 640;  // ten chunks of 64
  const uint64_t record = 4096 + 64 * 1024;
  auto tokens = synthetic::tokens(4, n);
  for (IoPath io : {IoPath::kDirect, IoPath::kBuffered}) {
    SCOPED_TRACE(std::string(io_path_name(io)));
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g_);
    o.io_path = io;
    auto e = Engine::open(o);
    ASSERT_OK(e);
    testing::HostKv host(g_, n);
    synthetic::fill_kv(g_, tokens, host.span(), n);
    ASSERT_OK((*e)->save(tokens, host.view));
    std::atomic<int> injected{0};
    GpuBuffer dst(host.bytes);
    Result<RestoreResult> r;
    {
      testing::FaultScope faults([&](const IoRequest& q, uint64_t) {
        const uint64_t target = 6 * record + 4096 + 1000;
        if (q.write || target < q.offset || target >= q.offset + q.length ||
            injected.exchange(1) != 0) {
          return testing::Fault{};
        }
        return testing::Fault{true, q.length, q.length, static_cast<int64_t>(target - q.offset)};
      });
      r = (*e)->restore(tokens, ChunkedKv{dst.view(), n});
    }
    ASSERT_EQ(injected.load(), 1);
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, n) << r->problem;
    EXPECT_EQ(r->checksum_misses, 0u);
    EXPECT_EQ(r->recheck_kept, 1u);
    EXPECT_EQ((*e)->stats().recheck_kept, 1u);
    testing::HostKv back(g_, n);
    dst.download(back.span());
    EXPECT_EQ(synthetic::first_mismatch(g_, tokens, back.span(), n), n);
    EXPECT_EQ((*e)->lookup(tokens).value(), n);
  }
}

// The caller's KV is written by work still queued on the device when save or restore is called
// (a prefill, a fill of the destination): kvtier's copies, on streams of its own, must start after
// it, or a save may checksum half-written KV (the record later dropped as corrupt) and a restore be
// overwritten by the pending fill.
TEST_F(GpuPathTest, WorkQueuedByTheCallerBeforeTheCallIsOrderedBeforeKvtiersCopies) {
  SKIP_WITHOUT_GPU();
  KvGeometry g = *geometry_for("tiny", 0, 1, 256);
  const uint64_t n = 60000;  // ~60 MB: long enough for the queued copy to still run at the call
  auto tokens = synthetic::tokens(8, n);
  testing::HostKv host(g, n);
  synthetic::fill_kv(g, tokens, host.span(), n);
  GpuBuffer pristine(host.bytes), src(host.bytes), dst(host.bytes);
  pristine.upload(host.span());
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  for (cudaStream_t caller : {cudaStream_t{nullptr}, side}) {
    SCOPED_TRACE(caller ? "non-blocking stream named in the call" : "legacy default stream");
    testing::TempDir dir;
    auto e = Engine::open(testing::small_options(dir.str(), g));
    ASSERT_OK(e);
    // A slow producer (~300 passes over 60 MB, some milliseconds), the last pass the real bytes.
    for (int i = 0; i < 300; ++i)
      ASSERT_EQ(cudaMemsetAsync(src.ptr, i, src.size, caller), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(src.ptr, pristine.ptr, src.size, cudaMemcpyDeviceToDevice, caller),
              cudaSuccess);
    ASSERT_OK((*e)->save(tokens, ChunkedKv{src.view(), n, caller}));
    for (int i = 0; i < 300; ++i)
      ASSERT_EQ(cudaMemsetAsync(dst.ptr, 0xEE, dst.size, caller), cudaSuccess);
    auto r = (*e)->restore(tokens, ChunkedKv{dst.view(), n, caller});
    ASSERT_OK(r);
    EXPECT_EQ(r->tokens_restored, n) << r->problem;
    EXPECT_EQ(r->checksum_misses, 0u);
    EXPECT_EQ(r->recheck_kept, 0u);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    testing::HostKv back(g, n);
    dst.download(back.span());
    EXPECT_EQ(synthetic::first_mismatch(g, tokens, back.span(), n), n);
  }
  cudaStreamDestroy(side);
}

TEST_F(GpuPathTest, DramTierHitRestoresIntoGpuByteExact) {
  SKIP_WITHOUT_GPU();
  Options o = testing::small_options(dir_.str(), g_);
  o.dram_bytes = 64 << 20;
  auto e = Engine::open(o);
  ASSERT_OK(e);
  const uint64_t n = 3000;
  auto tokens = synthetic::tokens(55, n);
  testing::HostKv host(g_, n);
  synthetic::fill_kv(g_, tokens, host.span(), n);
  GpuBuffer src(host.bytes), dst(host.bytes);
  src.upload(host.span());
  ASSERT_OK((*e)->save(tokens, ChunkedKv{src.view(), n}));
  auto r = (*e)->restore(tokens, ChunkedKv{dst.view(), n});
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, n);
  EXPECT_EQ(r->bytes_read, 0u);          // nothing came from the disk
  EXPECT_EQ(r->host_bytes, host.bytes);  // one DMA out of the tier per payload byte
  EXPECT_EQ((*e)->stats().dram_hits, (n + 63) / 64);
  testing::HostKv back(g_, n);
  dst.download(back.span());
  EXPECT_EQ(synthetic::first_mismatch(g_, tokens, back.span(), n), n);
}

// Restores from one engine on many threads at once, each into its own paged cache on the GPU, over
// the DRAM tier and over O_DIRECT (the seed benchmark's concurrency workload does this).
TEST_F(GpuPathTest, ConcurrentRestoresIntoSeparatePagedCachesAreByteExact) {
  SKIP_WITHOUT_GPU();
  // direct, gds (cuFile's registered buffers shared by a fair pool, where cuFile runs), dram
  const char* expect_gds = std::getenv("KVTIER_TEST_EXPECT_GDS");
  for (const auto& [io, dram] :
       {std::pair{IoPath::kDirect, uint64_t{0}}, std::pair{IoPath::kGds, uint64_t{0}},
        std::pair{IoPath::kDirect, uint64_t{256} << 20}}) {
    SCOPED_TRACE(dram > 0 ? "dram" : io == IoPath::kGds ? "gds" : "direct");
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g_);
    o.io_path = io;
    constexpr int kThreads = 8;
    const uint64_t n = 2048;  // whole chunks only
    std::vector<std::vector<Token>> sessions;
    std::vector<std::unique_ptr<GpuBuffer>> sources;
    {  // saved by an engine without a tier, as the benchmark's unique phase does
      auto first = Engine::open(o);
      ASSERT_OK(first);
      for (int i = 0; i < kThreads; ++i) {
        sessions.push_back(synthetic::tokens(500 + i, n));
        testing::HostKv host(g_, n);
        synthetic::fill_kv(g_, sessions.back(), host.span(), n);
        sources.push_back(std::make_unique<GpuBuffer>(host.bytes));
        sources.back()->upload(host.span());
        ASSERT_OK((*first)->save(sessions.back(), ChunkedKv{sources.back()->view(), n}));
      }
    }
    o.dram_bytes = dram;
    auto e = Engine::open(o);
    ASSERT_OK(e);
    for (int i = 0; i < kThreads && dram > 0; ++i) {  // saved again: the tier fills from GPU memory
      ASSERT_OK((*e)->save(sessions[i], ChunkedKv{sources[i]->view(), n}));
    }
    std::vector<std::unique_ptr<testing::PagedHost>> refs;
    std::vector<std::vector<int32_t>> tables;
    std::vector<std::unique_ptr<GpuPaged>> caches;
    for (int i = 0; i < kThreads; ++i) {
      refs.push_back(std::make_unique<testing::PagedHost>(g_, 160, 16, PagedLayout::kKvFirst));
      tables.push_back(testing::shuffled_blocks(n, 16, 160, testing::test_seed() + i));
    }
    for (int i = 0; i < kThreads; ++i)
      caches.push_back(std::make_unique<GpuPaged>(g_.layers, *refs[i], tables[i]));
    std::vector<std::thread> threads;
    std::vector<uint64_t> got(kThreads, 0);
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        auto r = (*e)->restore(sessions[i], caches[i]->view);
        got[i] = r ? r->tokens_restored : 0;
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int i = 0; i < kThreads; ++i) {
      EXPECT_EQ(got[i], n) << i;
      caches[i]->download(*refs[i]);
      testing::HostKv back(g_, n);
      testing::move_all(g_, *refs[i], tables[i], back.data.get(), n, n, /*to_paged=*/false);
      EXPECT_EQ(synthetic::first_mismatch(g_, sessions[i], back.span(), n), n) << i;
    }
    if (dram > 0) {
      EXPECT_EQ((*e)->stats().dram_hits, uint64_t{kThreads} * (n / 64));
    }
    if (io == IoPath::kGds && expect_gds != nullptr && std::string(expect_gds) == "used") {
      EXPECT_EQ((*e)->stats().gds_restores, uint64_t{kThreads});
    }
  }
}

// GPUDirect Storage through the real cuFile. KVTIER_TEST_EXPECT_GDS says what this machine should
// do: "used" (cuFile registers the store's files), "fallback" (it cannot: the reason must be
// reported), or unset (either, but honestly labelled).
TEST_F(GpuPathTest, GdsRestoreIsByteExactAndReportsItsModeOrWhyItFellBack) {
  SKIP_WITHOUT_GPU();
  Options o = testing::small_options(dir_.str(), g_);
  o.io_path = IoPath::kGds;
  o.log_level = LogLevel::kWarn;
  auto e = Engine::open(o);
  ASSERT_OK(e);
  const uint64_t n = 5000;
  auto tokens = synthetic::tokens(77, n);
  testing::HostKv host(g_, n);
  synthetic::fill_kv(g_, tokens, host.span(), n);
  ASSERT_OK((*e)->save(tokens, host.view));
  GpuBuffer dst(host.bytes);
  auto r = (*e)->restore(tokens, ChunkedKv{dst.view(), n});
  ASSERT_OK(r);
  EXPECT_EQ(r->tokens_restored, n);
  testing::HostKv back(g_, n);
  dst.download(back.span());
  EXPECT_EQ(synthetic::first_mismatch(g_, tokens, back.span(), n), n);
  const Stats s = (*e)->stats();
  std::printf("gds: %s\nfallback: %s\ngds restores: %llu\n", s.gds.c_str(), s.io_fallback.c_str(),
              static_cast<unsigned long long>(s.gds_restores));
  EXPECT_FALSE(s.gds.empty());
  const char* expect = std::getenv("KVTIER_TEST_EXPECT_GDS");
  if (s.gds_restores > 0) {
    // Read through cuFile: the mode must say which, and compat mode is never called GPUDirect.
    EXPECT_TRUE(s.gds.find("compat mode") != std::string::npos ||
                s.gds.find("peer-to-peer") != std::string::npos)
        << s.gds;
    if (expect != nullptr) {
      EXPECT_STREQ(expect, "used");
    }
    // Headers come back to the host to be checked (one 4 KiB block per record); payload only
    // crosses host memory when cuFile bounces it (compat mode: into its buffer, out to the GPU).
    const uint64_t headers = ((n + 63) / 64) * 4096;
    const bool p2p = s.gds.find("compat mode") == std::string::npos;
    EXPECT_EQ(r->host_bytes, (p2p ? 0 : 2 * r->bytes_read) + headers) << s.gds;
  } else {
    // Not read through cuFile: a reason a user can act on.
    EXPECT_FALSE(s.gds.find("unavailable") == std::string::npos &&
                 s.io_fallback.find("GDS") == std::string::npos)
        << s.gds << " / " << s.io_fallback;
    if (expect != nullptr) {
      EXPECT_STREQ(expect, "fallback");
    }
  }
}

}  // namespace
}  // namespace kvtier
