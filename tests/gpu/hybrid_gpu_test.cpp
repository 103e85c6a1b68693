// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A hybrid model (sliding-window layers beside full-attention ones, recurrent state) on a real
// CUDA device: saved from GPU memory, restored into GPU memory, contiguous and paged, through the
// direct path and the DRAM tier. A part's layers of contiguous memory are addressed as a paged
// kv_first view and a state as one, both by the CUDA kernels. Every byte compared: full layers
// for every token, window layers from the window's chunk on (and untouched before it), the state.
// Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "have_gpu.hpp"
#include "paged_reference.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint32_t kHeads = 4, kDim = 64, kChunk = 64, kBlock = 16, kWindow = 100;
constexpr uint32_t kStateLayers = 2;
constexpr uint64_t kStateBytes = 8192, kTokens = 333;
constexpr std::byte kPoison{0xEE};

KvGeometry hybrid_geometry() {
  KvGeometry g;
  g.model_id = "hybrid-gpu";
  g.layers = 4;
  g.kv_heads = kHeads;
  g.head_dim = kDim;
  g.element_bytes = 2;
  g.chunk_tokens = kChunk;
  g.layer_kinds = {LayerKind::kFullAttention, LayerKind::kSlidingWindow, LayerKind::kFullAttention,
                   LayerKind::kSlidingWindow};
  g.window_tokens = kWindow;
  g.state_layers = kStateLayers;
  g.state_bytes = kStateBytes;
  return g;
}

/// GPU memory holding a copy of `bytes`, freed with it.
struct Device {
  explicit Device(const std::vector<std::byte>& bytes) : size(bytes.size()) {
    EXPECT_EQ(cudaMalloc(&p, size), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, bytes.data(), size, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Device() { cudaFree(p); }
  std::vector<std::byte> download() const {
    std::vector<std::byte> out(size);
    EXPECT_EQ(cudaMemcpy(out.data(), p, size, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  void* p = nullptr;
  uint64_t size;
};

StateMemory state_view(const Device& d) {
  StateMemory s;
  for (uint32_t l = 0; l < kStateLayers; ++l)
    s.layers.push_back(
        {static_cast<std::byte*>(d.p) + l * kStateBytes, kStateBytes, MemoryKind::kCuda, 0});
  return s;
}

/// Counts rows of `got` (contiguous [2, layers, tokens, row]) that differ from `want` where the
/// restore must write them, and rows written where it must not.
std::pair<uint64_t, uint64_t> compare(const KvGeometry& g, const std::vector<std::byte>& got,
                                      const std::vector<std::byte>& want) {
  const uint64_t row = g.row_bytes(), from = (kTokens + 1 - kWindow) / kChunk * kChunk;
  uint64_t wrong = 0, touched = 0;
  for (uint32_t kv = 0; kv < 2; ++kv) {
    for (uint32_t l = 0; l < g.layers; ++l) {
      for (uint64_t t = 0; t < kTokens; ++t) {
        const uint64_t at = ((uint64_t{kv} * g.layers + l) * kTokens + t) * row;
        if (g.layer_kinds[l] == LayerKind::kSlidingWindow && t < from) {
          touched += std::any_of(got.begin() + at, got.begin() + at + row,
                                 [](std::byte b) { return b != kPoison; });
        } else {
          wrong += std::memcmp(got.data() + at, want.data() + at, row) != 0;
        }
      }
    }
  }
  return {wrong, touched};
}

TEST(HybridGpu, KvWindowAndStateRoundTripThroughGpuMemory) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(testing::test_seed());
  const KvGeometry g = hybrid_geometry();
  std::vector<std::byte> kv(g.bytes_for_tokens(kTokens)), state(kStateLayers * kStateBytes);
  for (auto& b : kv) b = static_cast<std::byte>(rng());
  for (auto& b : state) b = static_cast<std::byte>(rng());
  std::vector<Token> tokens(kTokens);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 100000);
  for (uint64_t dram : {uint64_t{0}, uint64_t{64} << 20}) {
    SCOPED_TRACE(dram ? "DRAM tier" : "direct");
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g);
    o.store_format = 2;
    o.io_path = IoPath::kDirect;
    o.dram_bytes = dram;
    o.tune = false;
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    {
      const Device source(kv), source_state(state);
      auto saved = (*e)->save(
          tokens,
          ChunkedKv{{static_cast<std::byte*>(source.p), source.size, MemoryKind::kCuda, 0},
                    kTokens},
          state_view(source_state));
      ASSERT_TRUE(saved) << saved.error().message();
      EXPECT_EQ(saved->tokens_stored, kTokens);
    }
    // Contiguous GPU memory.
    {
      const Device dest(std::vector<std::byte>(kv.size(), kPoison));
      const Device dest_state(std::vector<std::byte>(state.size(), kPoison));
      auto restored = (*e)->restore(
          tokens,
          ChunkedKv{{static_cast<std::byte*>(dest.p), dest.size, MemoryKind::kCuda, 0}, kTokens},
          state_view(dest_state));
      ASSERT_TRUE(restored) << restored.error().message();
      EXPECT_EQ(restored->tokens_restored, kTokens) << restored->problem;
      const auto [wrong, touched] = compare(g, dest.download(), kv);
      EXPECT_EQ(wrong, 0u);
      EXPECT_EQ(touched, 0u);
      EXPECT_TRUE(dest_state.download() == state);
    }
    // Paged GPU memory, every layout.
    for (PagedLayout layout : {PagedLayout::kKvFirst, PagedLayout::kBlockFirst,
                               PagedLayout::kPackedHeads, PagedLayout::kPackedTokens}) {
      SCOPED_TRACE("layout " + std::to_string(static_cast<int>(layout)));
      testing::PagedHost host(g, 30, kBlock, layout);
      const std::vector<int32_t> table = testing::shuffled_blocks(kTokens, kBlock, 30, rng());
      std::vector<std::unique_ptr<Device>> layers;
      PagedKv view = host.view;
      view.block_table = table;
      view.layers.clear();
      for (auto& l : host.layers) {
        layers.push_back(std::make_unique<Device>(l));
        view.layers.push_back(
            {static_cast<std::byte*>(layers.back()->p), l.size(), MemoryKind::kCuda, 0});
      }
      const Device dest_state(std::vector<std::byte>(state.size(), kPoison));
      auto restored = (*e)->restore(tokens, view, state_view(dest_state));
      ASSERT_TRUE(restored) << restored.error().message();
      EXPECT_EQ(restored->tokens_restored, kTokens) << restored->problem;
      for (size_t l = 0; l < layers.size(); ++l) host.layers[l] = layers[l]->download();
      std::vector<std::byte> got(kv.size(), kPoison);
      testing::move_all(g, host, table, got.data(), kTokens, kTokens, /*to_paged=*/false);
      const auto [wrong, touched] = compare(g, got, kv);
      EXPECT_EQ(wrong, 0u);
      EXPECT_EQ(touched, 0u);
      EXPECT_TRUE(dest_state.download() == state);
    }
  }
}

/// GPU copies of a paged host cache's layers, and the view of them.
struct DevicePaged {
  explicit DevicePaged(const testing::PagedHost& host) : view(host.view) {
    view.layers.clear();
    for (const auto& l : host.layers) {
      layers.push_back(std::make_unique<Device>(l));
      view.layers.push_back(
          {static_cast<std::byte*>(layers.back()->p), l.size(), MemoryKind::kCuda, 0});
    }
  }
  void download(testing::PagedHost& host) const {
    for (size_t l = 0; l < layers.size(); ++l) host.layers[l] = layers[l]->download();
  }
  std::vector<std::unique_ptr<Device>> layers;
  PagedKv view;
};

// vLLM's hybrid KV cache manager: each layer through a block table of its own (the window layers'
// naming -1 before the block of token n - W + 1, blocks vLLM let go of), window records a block
// long; saved from and restored into GPU paged caches, so the kernels address a table per layer.
TEST(HybridGpu, LayersWithBlockTablesOfTheirOwnSaveAndRestoreThroughTheKernels) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(testing::test_seed());
  KvGeometry g = hybrid_geometry();
  g.window_chunk_tokens = kBlock;
  std::vector<std::byte> kv(g.bytes_for_tokens(kTokens)), state(kStateLayers * kStateBytes);
  for (auto& b : kv) b = static_cast<std::byte>(rng());
  for (auto& b : state) b = static_cast<std::byte>(rng());
  std::vector<Token> tokens(kTokens);
  for (auto& t : tokens) t = static_cast<Token>(rng() % 100000);
  const uint32_t need = (kTokens + kBlock - 1) / kBlock, blocks = g.layers * need + 2;
  const uint64_t held_from = (kTokens + 1 - kWindow) / kBlock;
  // A table per layer, drawn apart; window layers' tables skip what left the window.
  auto tables_for = [&](uint64_t seed) {
    const std::vector<int32_t> all =
        testing::shuffled_blocks(uint64_t{g.layers} * need * kBlock, kBlock, blocks, seed);
    std::vector<std::vector<int32_t>> t(g.layers);
    for (uint32_t l = 0; l < g.layers; ++l) {
      t[l].assign(all.begin() + l * need, all.begin() + (l + 1) * need);
      if (g.layer_kinds[l] == LayerKind::kSlidingWindow)
        std::fill(t[l].begin(), t[l].begin() + held_from, kSkipBlock);
    }
    return t;
  };
  auto move = [&](testing::PagedHost& host, const std::vector<std::vector<int32_t>>& t,
                  std::byte* contiguous, bool to_paged) {
    testing::move_held(g, host, t, contiguous, kTokens, kTokens, to_paged);
  };
  // Half the saves read the window layers from copies of the blocks they hold, in tensors of their
  // own (fewer blocks: PagedKv::layer_num_blocks), as the vLLM connector saves a step's end.
  const uint32_t held = need - static_cast<uint32_t>(held_from);
  for (const int variant : {0, 1, 2, 3, 4, 5, 6, 7}) {
    const auto layout = static_cast<PagedLayout>(variant / 2);
    const bool from_copies = variant % 2 == 1;
    SCOPED_TRACE("layout " + std::to_string(static_cast<int>(layout)) +
                 (from_copies ? ", window layers saved from copies" : ""));
    testing::TempDir dir;
    Options o = testing::small_options(dir.str(), g);
    o.store_format = 2;
    o.io_path = IoPath::kDirect;
    o.tune = false;
    auto e = Engine::open(o);
    ASSERT_TRUE(e) << e.error().message();
    const auto saved_tables = tables_for(rng());
    testing::PagedHost source(g, blocks, kBlock, layout);
    for (auto& l : source.layers) {
      for (auto& b : l) b = static_cast<std::byte>(rng());  // blocks no table names: garbage
    }
    move(source, saved_tables, kv.data(), /*to_paged=*/true);
    {
      DevicePaged gpu(source);
      gpu.view.block_table = saved_tables[0];
      std::vector<std::vector<int32_t>> save_tables = saved_tables;
      std::unique_ptr<DevicePaged> copied;
      if (from_copies) {
        std::vector<std::vector<int32_t>> into(g.layers, std::vector<int32_t>(need, kSkipBlock));
        for (uint32_t l = 0; l < g.layers; ++l) {
          if (g.layer_kinds[l] != LayerKind::kSlidingWindow) continue;
          for (uint64_t i = held_from; i < need; ++i)
            into[l][i] = static_cast<int32_t>(i - held_from);
        }
        testing::PagedHost copies(g, held, kBlock, layout);
        testing::move_held(g, copies, into, kv.data(), kTokens, kTokens, /*to_paged=*/true);
        copied = std::make_unique<DevicePaged>(copies);
        for (uint32_t l = 0; l < g.layers; ++l) {
          const bool window = g.layer_kinds[l] == LayerKind::kSlidingWindow;
          gpu.view.layer_num_blocks.push_back(window ? held : gpu.view.num_blocks);
          if (!window) continue;
          gpu.view.layers[l] = copied->view.layers[l];
          save_tables[l] = into[l];
        }
      }
      for (const auto& t : save_tables) gpu.view.layer_block_tables.emplace_back(t);
      const Device source_state(state);
      auto saved = (*e)->save(tokens, gpu.view, state_view(source_state));
      ASSERT_TRUE(saved) << saved.error().message();
      EXPECT_EQ(saved->tokens_stored, kTokens);
    }
    const auto tables = tables_for(rng());
    testing::PagedHost dest(g, blocks, kBlock, layout);
    DevicePaged gpu(dest);
    gpu.view.block_table = tables[0];
    for (const auto& t : tables) gpu.view.layer_block_tables.emplace_back(t);
    const Device dest_state(std::vector<std::byte>(state.size(), kPoison));
    auto restored = (*e)->restore(tokens, gpu.view, state_view(dest_state));
    ASSERT_TRUE(restored) << restored.error().message();
    EXPECT_EQ(restored->tokens_restored, kTokens) << restored->problem;
    gpu.download(dest);
    std::vector<std::byte> got(kv.size(), kPoison);
    move(dest, tables, got.data(), /*to_paged=*/false);
    uint64_t wrong = 0;
    for (uint32_t k = 0; k < 2; ++k)
      for (uint32_t l = 0; l < g.layers; ++l)
        for (uint64_t tok = 0; tok < kTokens; ++tok) {
          if (tables[l][tok / kBlock] == kSkipBlock) continue;
          const uint64_t at = ((uint64_t{k} * g.layers + l) * kTokens + tok) * g.row_bytes();
          wrong += std::memcmp(got.data() + at, kv.data() + at, g.row_bytes()) != 0;
        }
    EXPECT_EQ(wrong, 0u) << "rows restored through the layers' own tables that differ";
    EXPECT_TRUE(dest_state.download() == state);
  }
}

}  // namespace
}  // namespace kvtier
