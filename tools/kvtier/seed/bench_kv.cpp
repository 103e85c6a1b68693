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

#include "api/try.hpp"
#include "kv_file_rows.hpp"
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
  HostBenchKv(const KvGeometry& g, uint64_t max_tokens, const KvSource& kv)
      : g_(g),
        first_word_(synthetic::first_word(g)),
        bf16_like_(kv.kind == KvSource::Kind::kBf16Like),
        file_(kv.file) {
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
      for (uint64_t t = first; t < last; ++t) {
        if (file_) {
          visit_file_heads(ids, t, [](std::byte* head, const std::byte* want, uint64_t bytes) {
            std::memcpy(head, want, bytes);
            return true;
          });
        } else {
          visit_rows(ids, t, [](uint64_t* row, uint64_t w, uint64_t v) {
            row[w] = v;
            return true;
          });
        }
      }
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
        const bool same =
            file_ ? visit_file_heads(ids, t,
                                     [](std::byte* head, const std::byte* want, uint64_t bytes) {
                                       return std::memcmp(head, want, bytes) == 0;
                                     })
                  : visit_rows(ids, t,
                               [](uint64_t* row, uint64_t w, uint64_t v) { return row[w] == v; });
        if (!same) {
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
    for (uint32_t kv = 0; kv < g_.kv_tensors; ++kv) {
      for (uint32_t l = 0; l < g_.layers; ++l) {
        const uint64_t block = uint64_t{kv} * g_.layers + l;
        auto* row = reinterpret_cast<uint64_t*>(row_of(kv, l, t));
        const uint64_t seed = synthetic::row_seed(ids[t], t, block);
        for (uint64_t w = 0; w < words; ++w) {
          if (!fn(row, w, synthetic::kv_word(seed, first_word_ + w, bf16_like_))) return false;
        }
      }
    }
    return true;
  }

  // Calls fn(head, expected, bytes) for each of token t's heads in every (K|V, layer), the
  // expected bytes those kv_file_rows.hpp maps the head to in the file; stops and returns false
  // when fn does.
  template <typename Fn>
  bool visit_file_heads(std::span<const Token> ids, uint64_t t, Fn&& fn) {
    const uint64_t head_bytes = uint64_t{g_.head_dim} * g_.element_bytes;
    // The model's head number of this rank's first head: the file is tiled over the whole
    // model's heads, so every TP size sees the same bytes for a head.
    const uint64_t first_head = first_word_ * 8 / head_bytes;
    for (uint32_t kv = 0; kv < g_.kv_tensors; ++kv) {
      for (uint32_t l = 0; l < g_.layers; ++l) {
        std::byte* row = row_of(kv, l, t);
        for (uint32_t h = 0; h < g_.kv_heads; ++h) {
          const uint64_t at = kv_file_head(file_->info.dims, ids.data(), kv, t, l,
                                           static_cast<uint32_t>(first_head + h));
          if (!fn(row + h * head_bytes, file_->bytes.data() + at * head_bytes, head_bytes))
            return false;
        }
      }
    }
    return true;
  }

  // Token t's row of K or V (kv) in layer l of the paged cache.
  std::byte* row_of(uint32_t kv, uint32_t l, uint64_t t) {
    const uint64_t slot =
        uint64_t(table_[t / kBenchBlockSize]) * kBenchBlockSize + t % kBenchBlockSize;
    return layers_[l].get() +
           (uint64_t{kv} * view_.num_blocks * kBenchBlockSize + slot) * g_.row_bytes();
  }

  KvGeometry g_;
  uint64_t first_word_ = 0;
  bool bf16_like_ = false;
  std::shared_ptr<const KvFile> file_;  // file KV (kv_file_rows.hpp) where set, else synthetic
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
                                                 std::string_view device, int gpu,
                                                 const KvSource& kv) {
  if (uint64_t{g.head_dim} * g.element_bytes % 8 != 0)
    return fail(ErrorCode::kInvalidArgument, "bench KV: head bytes not a multiple of 8");
  if (kv.kind == KvSource::Kind::kFile) {
    KVTIER_EXPECTS(kv.file != nullptr, "bench KV: file KV without its file");
    KVTIER_TRY(kv_file_fits(kv.file->info, g));
  }
  if (device == "cuda" || device == "auto") {
    auto cuda = make_cuda_bench_kv(g, max_tokens, gpu, kv);
    if (cuda || device == "cuda" || cuda.error().code() != ErrorCode::kNotSupported) return cuda;
  } else if (device != "host") {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("--device '{}': expected auto, cuda or host", device));
  }
  return std::unique_ptr<BenchKv>(new HostBenchKv(g, max_tokens, kv));
}

}  // namespace kvtier::seed
