// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "bench_kv.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "synthetic.hpp"
#include "synthetic_rows.hpp"

namespace kvtier::seed {
namespace {

Status too_long(uint64_t tokens) {
  return {ErrorCode::kInvalidArgument,
          fmt::format("bench KV: {} tokens do not fit the cache", tokens)};
}

class HostBenchKv final : public BenchKv {
 public:
  HostBenchKv(const KvGeometry& g, uint64_t max_tokens, bool bf16_like)
      : g_(g), first_word_(synthetic::first_word(g)), bf16_like_(bf16_like) {
    const uint32_t blocks =
        static_cast<uint32_t>((max_tokens + kBenchBlockSize - 1) / kBenchBlockSize);
    layer_bytes_ = uint64_t{g.kv_tensors} * blocks * kBenchBlockSize * g.row_bytes();
    table_ = shuffled_blocks(blocks);
    for (uint32_t l = 0; l < g.layers; ++l) {
      layers_.emplace_back(new std::byte[layer_bytes_]);
      std::memset(layers_.back().get(), 0,
                  layer_bytes_);  // resident, as a serving engine's cache is
      view_.layers.push_back({layers_.back().get(), layer_bytes_, MemoryKind::kHost, 0});
    }
    view_.block_table = table_;
    view_.block_size = kBenchBlockSize;
    view_.num_blocks = blocks;
    view_.layout = PagedLayout::kKvFirst;
  }

  std::string describe() const override {
    return "host (host-emulated device; KV lands in host memory)";
  }
  std::string pci_bus_id() const override { return {}; }
  const PagedKv& view() const override { return view_; }

  Status prefill(std::span<const Token> ids) override {
    if (ids.size() > uint64_t{view_.num_blocks} * kBenchBlockSize) return too_long(ids.size());
    synthetic::parallel_tokens(ids.size(), [&](uint64_t first, uint64_t last) {
      for (uint64_t t = first; t < last; ++t)
        visit_rows(ids, t, [](uint64_t* row, uint64_t w, uint64_t v) {
          row[w] = v;
          return true;
        });
    });
    return {};
  }

  Status poison() override {
    for (auto& l : layers_) std::memset(l.get(), 0xa5, layer_bytes_);
    return {};
  }

  Result<double> copy_ceiling(uint64_t bytes) override {
    constexpr uint64_t kPiece = uint64_t{256} << 20;
    if (!scratch_src_) {
      scratch_src_.reset(new std::byte[kPiece]);
      scratch_dst_.reset(new std::byte[kPiece]);
      std::memset(scratch_src_.get(), 1, kPiece);
      std::memset(scratch_dst_.get(), 2, kPiece);
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t done = 0; done < bytes; done += kPiece) {
      std::memcpy(scratch_dst_.get(), scratch_src_.get(), std::min(kPiece, bytes - done));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::string copy_ceiling_name() const override { return "host memcpy (one thread)"; }

  Result<uint64_t> first_mismatch(std::span<const Token> ids) override {
    if (ids.size() > uint64_t{view_.num_blocks} * kBenchBlockSize)
      return fail(too_long(ids.size()));
    std::atomic<uint64_t> bad{ids.size()};
    synthetic::parallel_tokens(ids.size(), [&](uint64_t first, uint64_t last) {
      for (uint64_t t = first; t < last && t < bad; ++t) {
        if (!visit_rows(ids, t,
                        [](uint64_t* row, uint64_t w, uint64_t v) { return row[w] == v; })) {
          uint64_t seen = bad;
          while (t < seen && !bad.compare_exchange_weak(seen, t)) {
          }
          return;
        }
      }
    });
    return bad.load();
  }

 private:
  // Calls fn(row, word, expected) for every word of token t's rows in every (K|V, layer); stops
  // and returns false when fn does.
  template <typename Fn>
  bool visit_rows(std::span<const Token> ids, uint64_t t, Fn&& fn) {
    const uint64_t words = g_.row_bytes() / 8;
    const uint64_t slot =
        uint64_t(table_[t / kBenchBlockSize]) * kBenchBlockSize + t % kBenchBlockSize;
    for (uint32_t kv = 0; kv < g_.kv_tensors; ++kv) {
      for (uint32_t l = 0; l < g_.layers; ++l) {
        const uint64_t block = uint64_t{kv} * g_.layers + l;
        auto* row = reinterpret_cast<uint64_t*>(
            layers_[l].get() +
            (uint64_t{kv} * view_.num_blocks * kBenchBlockSize + slot) * g_.row_bytes());
        const uint64_t seed = synthetic::row_seed(ids[t], t, block);
        for (uint64_t w = 0; w < words; ++w) {
          if (!fn(row, w, synthetic::kv_word(seed, first_word_ + w, bf16_like_))) return false;
        }
      }
    }
    return true;
  }

  KvGeometry g_;
  uint64_t first_word_ = 0;
  bool bf16_like_ = false;
  uint64_t layer_bytes_ = 0;
  std::vector<int32_t> table_;
  std::vector<std::unique_ptr<std::byte[]>> layers_;
  std::unique_ptr<std::byte[]> scratch_src_, scratch_dst_;
  PagedKv view_;
};

}  // namespace

std::vector<int32_t> shuffled_blocks(uint32_t blocks) {
  std::vector<int32_t> table(blocks);
  for (uint32_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(b);
  std::mt19937 rng(12345);
  std::shuffle(table.begin(), table.end(), rng);
  return table;
}

Result<std::unique_ptr<BenchKv>> BenchKv::create(const KvGeometry& g, uint64_t max_tokens,
                                                 std::string_view device, int gpu, bool bf16_like) {
  if (uint64_t{g.head_dim} * g.element_bytes % 8 != 0)
    return fail(ErrorCode::kInvalidArgument, "bench KV: head bytes not a multiple of 8");
  if (device == "cuda" || device == "auto") {
    auto cuda = make_cuda_bench_kv(g, max_tokens, gpu, bf16_like);
    if (cuda || device == "cuda") return cuda;
  } else if (device != "host") {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("--device '{}': expected auto, cuda or host", device));
  }
  return std::unique_ptr<BenchKv>(new HostBenchKv(g, max_tokens, bf16_like));
}

}  // namespace kvtier::seed
