// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// TP-free stores (Options::store_format 2) on a real CUDA device: ranks of one TP size save from
// paged caches in GPU memory, ranks of others restore into paged caches in GPU memory through
// each path, every byte compared with the model's KV. The CUDA kernels place a head group's
// records in the columns of the rank's rows (KvLayoutParams::col_offset). Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "compressible_kv.hpp"
#include "have_gpu.hpp"
#include "paged_reference.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint32_t kHeads = 8, kLayers = 3, kDim = 64, kChunk = 64, kBlock = 16;
constexpr uint64_t kTokens = 333;

KvGeometry rank_geometry(uint32_t r, uint32_t tp) {
  KvGeometry g;
  g.model_id = "tp-free-gpu";
  g.layers = kLayers;
  g.kv_heads = kHeads / tp;
  g.head_dim = kDim;
  g.element_bytes = 2;
  g.chunk_tokens = kChunk;
  g.tp_rank = r;
  g.tp_world = tp;
  return g;
}

/// Rank r of TP tp's heads of `whole` ([2, layers, tokens, heads, dim]).
std::vector<std::byte> slice(const std::vector<std::byte>& whole, uint32_t r, uint32_t tp) {
  const uint64_t head = kDim * 2, row = kHeads * head, rank_row = kHeads / tp * head;
  std::vector<std::byte> out(2 * kLayers * kTokens * rank_row);
  for (uint64_t line = 0; line < 2 * kLayers * kTokens; ++line) {
    std::memcpy(out.data() + line * rank_row, whole.data() + line * row + r * rank_row, rank_row);
  }
  return out;
}

/// A paged cache in GPU memory, poisoned, with its host reference.
struct GpuCache {
  GpuCache(const KvGeometry& g, PagedLayout layout, uint64_t seed)
      : host(g, 30, kBlock, layout), table(testing::shuffled_blocks(kTokens, kBlock, 30, seed)) {
    view = host.view;
    view.block_table = table;
    view.layers.clear();
    for (auto& l : host.layers) {
      void* p = nullptr;
      EXPECT_EQ(cudaMalloc(&p, l.size()), cudaSuccess);
      EXPECT_EQ(cudaMemset(p, 0xEE, l.size()), cudaSuccess);
      gpu.push_back(p);
      view.layers.push_back({static_cast<std::byte*>(p), l.size(), MemoryKind::kCuda, 0});
    }
  }
  ~GpuCache() {
    for (void* p : gpu) cudaFree(p);
  }
  void upload() {
    for (size_t l = 0; l < gpu.size(); ++l) {
      ASSERT_EQ(
          cudaMemcpy(gpu[l], host.layers[l].data(), host.layers[l].size(), cudaMemcpyHostToDevice),
          cudaSuccess);
    }
  }
  void download() {
    for (size_t l = 0; l < gpu.size(); ++l) {
      ASSERT_EQ(
          cudaMemcpy(host.layers[l].data(), gpu[l], host.layers[l].size(), cudaMemcpyDeviceToHost),
          cudaSuccess);
    }
  }
  testing::PagedHost host;
  std::vector<int32_t> table;
  std::vector<void*> gpu;
  PagedKv view;
};

/// TP 2 saves from GPU memory, TP 1, 2, 4 and 8 restore into it, over every path and paged
/// layout. `coded`: the store keeps its records coded (Options::compression), the KV made
/// compressible except chunk 1, which stays random (kept raw beside the coded ones).
void tp_change_in_gpu_memory(bool coded) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::byte> whole(2ull * kLayers * kTokens * kHeads * kDim * 2);
  for (auto& b : whole) b = static_cast<std::byte>(rng());
  if (coded) {
    const uint64_t row = uint64_t{kHeads} * kDim * 2;
    for (uint64_t line = 0; line < 2ull * kLayers; ++line) {
      const auto first = whole.begin() + static_cast<ptrdiff_t>(line * kTokens * row);
      testing::bf16_like(std::span(&*first, kChunk * row));  // chunk 0
      testing::bf16_like(std::span(&*first + 2 * kChunk * row, (kTokens - 2 * kChunk) * row));
    }
  }
  std::vector<Token> tokens(kTokens);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 100000);
  struct Path {
    const char* name;
    IoPath io;
    uint64_t dram;
  };
  for (const Path& path : {Path{"direct", IoPath::kDirect, 0}, Path{"gds", IoPath::kGds, 0},
                           Path{"dram", IoPath::kDirect, 64 << 20}}) {
    for (PagedLayout layout : {PagedLayout::kKvFirst, PagedLayout::kBlockFirst,
                               PagedLayout::kPackedHeads, PagedLayout::kPackedTokens}) {
      SCOPED_TRACE(std::string(path.name) + " layout " + std::to_string(static_cast<int>(layout)));
      testing::TempDir dir;
      auto options = [&](uint32_t r, uint32_t tp) {
        Options o = testing::small_options(dir.str(), rank_geometry(r, tp));
        o.store_format = 2;
        o.io_path = path.io;
        o.dram_bytes = path.dram;
        o.tune = false;
        o.compression = coded ? Compression::kSplit16 : Compression::kOff;
        return o;
      };
      for (uint32_t r = 0; r < 2; ++r) {  // TP 2 saves from its GPU caches
        const KvGeometry g = rank_geometry(r, 2);
        GpuCache cache(g, layout, rng());
        std::vector<std::byte> mine = slice(whole, r, 2);
        testing::move_all(g, cache.host, cache.table, mine.data(), kTokens, kTokens, true);
        cache.upload();
        auto e = Engine::open(options(r, 2));
        ASSERT_TRUE(e) << e.error().message();
        auto saved = (*e)->save(tokens, cache.view);
        ASSERT_TRUE(saved) << saved.error().message();
        if (coded) {
          EXPECT_GT((*e)->stats().coded_records_written, 0u);
        }
      }
      for (uint32_t tp : {1u, 2u, 4u, 8u}) {
        for (uint32_t r = 0; r < tp; ++r) {
          const KvGeometry g = rank_geometry(r, tp);
          GpuCache cache(g, layout, rng());
          auto e = Engine::open(options(r, tp));
          ASSERT_TRUE(e) << e.error().message();
          auto restored = (*e)->restore(tokens, cache.view);
          ASSERT_TRUE(restored) << restored.error().message();
          EXPECT_EQ(restored->tokens_restored, kTokens) << restored->problem;
          cache.download();
          std::vector<std::byte> got(slice(whole, r, tp).size());
          testing::move_all(g, cache.host, cache.table, got.data(), kTokens, kTokens, false);
          EXPECT_TRUE(got == slice(whole, r, tp)) << "rank " << r << " of TP " << tp;
        }
      }
    }
  }
}

TEST(TpFreeGpu, RanksOfEveryTpSizeRestoreIntoGpuMemoryWhatTpTwoSavedFromIt) {
  tp_change_in_gpu_memory(/*coded=*/false);
}

TEST(TpFreeGpu, CodedRecordsRestoreIntoGpuMemoryAtEveryTpSize) {
  tp_change_in_gpu_memory(/*coded=*/true);
}

// A coded record damaged on the drive, restored into GPU memory where the device decodes it: a
// miss at its chunk, never wrong KV, and the record dropped. Damage to the codec's header and
// table is found on the host before anything is launched; damage to its blocks by the decoder or
// by the checksum of what it decoded.
TEST(TpFreeGpu, ADamagedCodedRecordDecodedOnTheGpuIsAMissNeverWrongKv) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::byte> whole(2ull * kLayers * kTokens * kHeads * kDim * 2);
  for (auto& b : whole) b = static_cast<std::byte>(rng());
  testing::bf16_like(whole);
  std::vector<Token> tokens(kTokens);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 100000);
  const KvGeometry g = rank_geometry(0, 1);
  const uint64_t row = g.row_bytes();
  for (int trial = 0; trial < 12; ++trial) {
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g);
    o.store_format = 2;
    o.tune = false;
    o.compression = Compression::kSplit16;
    const PagedLayout layout = static_cast<PagedLayout>(trial % 4);
    {
      GpuCache cache(g, layout, rng());
      testing::move_all(g, cache.host, cache.table, whole.data(), kTokens, kTokens, true);
      cache.upload();
      auto e = Engine::open(o);
      ASSERT_TRUE(e) << e.error().message();
      auto saved = (*e)->save(tokens, cache.view);
      ASSERT_TRUE(saved) << saved.error().message();
    }
    const std::vector<testing::StoredPayload> all = testing::stored_payloads(dir.path());
    ASSERT_FALSE(all.empty());
    for (const auto& p : all) ASSERT_TRUE(p.coded);
    const std::vector<testing::StoredPayload> payloads = testing::payloads_of_a_file(all, rng);
    const size_t chunk = rng() % payloads.size();
    const testing::StoredPayload& p = payloads[chunk];
    const uint64_t at = trial % 2 == 0 ? rng() % std::min<uint64_t>(p.bytes, 256) : rng() % p.bytes;
    testing::damage(p, at, rng);
    SCOPED_TRACE(::testing::Message() << "byte " << at << " of chunk " << chunk << ", layout "
                                      << static_cast<int>(layout));
    GpuCache cache(g, layout, rng());
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    auto restored = (*e)->restore(tokens, cache.view);
    ASSERT_TRUE(restored) << restored.error().message();
    EXPECT_EQ(restored->tokens_restored, chunk * kChunk) << restored->problem;
    EXPECT_EQ(restored->checksum_misses, 1u);
    cache.download();
    std::vector<std::byte> got(whole.size());
    testing::move_all(g, cache.host, cache.table, got.data(), kTokens, kTokens, false);
    for (uint64_t line = 0; line < 2ull * kLayers; ++line) {
      for (uint64_t t = 0; t < restored->tokens_restored; ++t) {
        const uint64_t off = (line * kTokens + t) * row;
        ASSERT_EQ(std::memcmp(got.data() + off, whole.data() + off, row), 0) << "token " << t;
      }
    }
    EXPECT_EQ(*(*e)->lookup(tokens), chunk * kChunk);
  }
}

}  // namespace
}  // namespace kvtier
