// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// GPU data-path benchmark (issue 3): one 100K-token session of a TP-2 model, both ranks' shards,
// restored from the store into GPU memory (vLLM paged layout), against ceilings measured in the
// same run: raw O_DIRECT read of the same records, pinned H2D copy, device-to-device copy; and the
// scatter kernel against D2D. Prints a table and writes JSON.
// Usage: kvtier_gpu_bench <store dir> <out.json> [tokens] [repeats]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/kernels.hpp"
#include "kvtier/kvtier.hpp"
#include "metrics/counters.hpp"
#include "synthetic.hpp"

using namespace kvtier;
using Clock = std::chrono::steady_clock;

namespace {

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

template <typename T>
T ok_or_die(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

double median(std::vector<double> v) { return metrics::median(std::move(v)).value_or(0); }

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Bytes/second of a copy of `bytes` done `reps` times, timed with events.
double time_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int reps) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  CHECK_CUDA(cudaMemcpy(dst, src, bytes, kind));  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind));
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / 1e3);
  }
  return static_cast<double>(bytes) / median(t);
}

/// One rank: its engine options, a paged destination on the GPU (vLLM's [2, blocks, 16, H, D]).
struct Rank {
  Options options;
  std::vector<void*> layers;
  std::vector<int32_t> table;
  PagedKv view;
};

Rank make_rank(const std::string& root, uint32_t rank, uint64_t tokens, const std::string& io,
               uint64_t request_bytes = 16 << 20) {
  Rank r;
  r.options.io_request_bytes = request_bytes;
  r.options.staging_bytes = 8 * request_bytes;
  r.options.root = root;
  r.options.geometry = ok_or_die(geometry_for("qwen3-coder-30b-a3b", rank, 2, 256), "geometry");
  r.options.capacity_bytes = uint64_t{24} << 30;
  r.options.io_path = ok_or_die(parse_io_path(io), "io path");
  const uint32_t bs = 16;
  const uint32_t blocks = static_cast<uint32_t>((tokens + bs - 1) / bs);
  const uint64_t layer_bytes = uint64_t{blocks} * 2 * bs * r.options.geometry.row_bytes();
  for (uint32_t l = 0; l < r.options.geometry.layers; ++l) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, layer_bytes));
    r.layers.push_back(p);
    r.view.layers.push_back({static_cast<std::byte*>(p), layer_bytes, MemoryKind::kCuda, 0});
  }
  for (uint32_t b = 0; b < blocks; ++b)
    r.table.push_back(static_cast<int32_t>((b * 7919u) % blocks));  // scattered
  r.view.block_table = r.table;
  r.view.block_size = bs;
  r.view.num_blocks = blocks;
  r.view.layout = PagedLayout::kKvFirst;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <store dir> <out.json> [tokens] [repeats]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const uint64_t tokens = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 100000;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  nlohmann::ordered_json out;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  out["gpu"] = prop.name;
  out["tokens"] = tokens;

  // Ceilings of the links.
  const size_t big = size_t{4} << 30;
  void *d0, *d1, *pinned;
  CHECK_CUDA(cudaMalloc(&d0, big));
  CHECK_CUDA(cudaMalloc(&d1, big));
  CHECK_CUDA(cudaHostAlloc(&pinned, big, cudaHostAllocDefault));
  std::memset(pinned, 0x5a, big);
  CHECK_CUDA(cudaMemset(d0, 0x33, big));
  const double d2d = 2 * time_copy(d1, d0, big, cudaMemcpyDeviceToDevice, 10);  // read + write
  const double h2d = time_copy(d0, pinned, big, cudaMemcpyHostToDevice, 5);
  std::printf("pinned H2D %.1f GB/s, D2D %.0f GB/s (read+write)\n", h2d / 1e9, d2d / 1e9);
  out["h2d_gb_per_s"] = h2d / 1e9;
  out["d2d_gb_per_s"] = d2d / 1e9;

  // Save both ranks' shards from GPU memory (contiguous form), KV generated from the token ids.
  auto ids = synthetic::tokens(42, tokens);
  uint64_t shard_bytes = 0;
  double save_s = 0;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    Rank r = make_rank(root, rank, tokens, "direct");
    const KvGeometry& g = r.options.geometry;
    shard_bytes = g.bytes_for_tokens(tokens);
    std::vector<std::byte> host(shard_bytes);
    synthetic::fill_kv(g, ids, host, tokens);
    void* src = nullptr;
    CHECK_CUDA(cudaMalloc(&src, shard_bytes));
    CHECK_CUDA(cudaMemcpy(src, host.data(), shard_bytes, cudaMemcpyHostToDevice));
    auto engine = ok_or_die(Engine::open(r.options), "open");
    auto t0 = Clock::now();
    ok_or_die(engine->save(
                  ids, ChunkedKv{{static_cast<std::byte*>(src), shard_bytes, MemoryKind::kCuda, 0},
                                 tokens}),
              "save");
    save_s += since(t0);
    CHECK_CUDA(cudaFree(src));
    for (void* p : r.layers) CHECK_CUDA(cudaFree(p));
  }
  std::printf("saved 2 shards x %.2f GB from GPU memory in %.2f s\n", shard_bytes / 1e9, save_s);
  out["save_gb_per_s"] = 2.0 * shard_bytes / save_s / 1e9;

  // Restores: both ranks at once (two engines, two threads, one GPU), paged destination.
  struct Config {
    std::string name, io;
    uint64_t request;
  };
  std::vector<Config> configs = {Config{"direct", "direct", 16 << 20},
                                 Config{"buffered", "buffered", 16 << 20}};
  if (std::getenv("KVTIER_BENCH_GDS") != nullptr) configs.push_back(Config{"gds", "gds", 16 << 20});
  for (const Config& config : configs) {
    const std::string& io = config.io;
    std::vector<double> restore_s, ceiling_s;
    uint64_t staged = 0, restored = 0, via_gds = 0;
    std::string gds_counts;
    std::string gds_mode;
    bool exact = true;
    for (int rep = 0; rep < repeats; ++rep) {
      for (int step = 0; step < 2; ++step) {
        const bool ceiling = (step == 0) == (rep % 2 == 0);
        std::system("sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null");
        std::vector<std::thread> threads;
        std::vector<Stats> stats(2);
        std::vector<uint64_t> got(2);
        std::vector<Rank> ranks;
        for (uint32_t rank = 0; rank < 2; ++rank) {
          ranks.push_back(make_rank(root, rank, tokens, ceiling ? "direct" : io, config.request));
        }
        auto t0 = Clock::now();
        for (uint32_t rank = 0; rank < 2; ++rank) {
          threads.emplace_back([&, rank] {
            auto engine = ok_or_die(Engine::open(ranks[rank].options), "open");
            if (ceiling) {
              ok_or_die(engine->measure_read_ceiling(ids), "ceiling");
            } else {
              auto res = ok_or_die(engine->restore(ids, ranks[rank].view), "restore");
              got[rank] = res.tokens_restored;
              stats[rank] = engine->stats();
            }
          });
        }
        for (auto& t : threads) t.join();
        const double s = since(t0);
        (ceiling ? ceiling_s : restore_s).push_back(s);
        if (!ceiling) {
          staged = stats[0].restore_host_bytes + stats[1].restore_host_bytes;
          via_gds = stats[0].gds_restores + stats[1].gds_restores;
          gds_mode = stats[0].gds +
                     (stats[0].io_fallback.empty() ? "" : " | fallback: " + stats[0].io_fallback);
          gds_counts = stats[0].gds_io_counts;
          restored = 2 * shard_bytes;
          exact = exact && got[0] == tokens && got[1] == tokens;
        }
        for (Rank& r : ranks)
          for (void* p : r.layers) CHECK_CUDA(cudaFree(p));
      }
    }
    const double r50 = median(restore_s), c50 = median(ceiling_s);
    // RestoreResult::host_bytes per path: O_DIRECT 1x read + 1x DMA to the GPU; buffered 3x + 1x;
    // cuFile compat mode 2x (its bounce buffers) + the headers copied back; peer-to-peer ~0.
    const double host_bytes = static_cast<double>(staged) / static_cast<double>(restored);
    std::printf(
        "%-9s restore both ranks %.0f ms (%.2f GB/s) | raw O_DIRECT read of the same records %.0f "
        "ms "
        "(%.2f GB/s) | ratio %.2f | accounted host bytes per byte %.4f | %s\n",
        config.name.c_str(), r50 * 1e3, 2.0 * shard_bytes / r50 / 1e9, c50 * 1e3,
        2.0 * shard_bytes / c50 / 1e9, c50 / r50, host_bytes,
        exact ? "all tokens verified" : "INCOMPLETE");
    if (config.io == "gds") {
      std::printf("          cuFile: %s (restores read through cuFile: %llu)\n", gds_mode.c_str(),
                  static_cast<unsigned long long>(via_gds));
      std::printf("          %s\n", gds_counts.c_str());
    }
    out["restore"][config.name] = {{"gds_mode", gds_mode},
                                   {"gds_restores", via_gds},
                                   {"restore_seconds", restore_s},
                                   {"ceiling_seconds", ceiling_s},
                                   {"ratio_to_ceiling", c50 / r50},
                                   {"accounted_host_bytes_per_byte", host_bytes},
                                   {"complete", exact}};
  }

  // The DRAM tier: both ranks save into engines with a tier big enough for their shard, then
  // restore from it (no disk read) into the paged layout, against pinned H2D.
  {
    std::vector<Rank> ranks;
    std::vector<std::unique_ptr<Engine>> engines;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      ranks.push_back(make_rank(root + "-dram", rank, tokens, "direct"));
      ranks.back().options.dram_bytes = shard_bytes + (uint64_t{256} << 20);
      engines.push_back(ok_or_die(Engine::open(ranks.back().options), "open with DRAM tier"));
      const KvGeometry& g = ranks.back().options.geometry;
      std::vector<std::byte> host(shard_bytes);
      synthetic::fill_kv(g, ids, host, tokens);
      void* src = nullptr;
      CHECK_CUDA(cudaMalloc(&src, shard_bytes));
      CHECK_CUDA(cudaMemcpy(src, host.data(), shard_bytes, cudaMemcpyHostToDevice));
      ok_or_die(
          engines.back()->save(
              ids,
              ChunkedKv{{static_cast<std::byte*>(src), shard_bytes, MemoryKind::kCuda, 0}, tokens}),
          "save with DRAM tier");
      CHECK_CUDA(cudaFree(src));
    }
    std::vector<double> t;
    bool exact = true;
    uint64_t hits = 0, read = 0;
    for (int rep = 0; rep < repeats + 1; ++rep) {
      std::vector<std::thread> threads;
      std::vector<RestoreResult> res(2);
      auto t0 = Clock::now();
      for (uint32_t rank = 0; rank < 2; ++rank) {
        threads.emplace_back([&, rank] {
          res[rank] = ok_or_die(engines[rank]->restore(ids, ranks[rank].view), "restore");
        });
      }
      for (auto& th : threads) th.join();
      if (rep > 0) t.push_back(since(t0));  // the first restore warms the pinned mappings
      exact = exact && res[0].tokens_restored == tokens && res[1].tokens_restored == tokens;
      read += res[0].bytes_read + res[1].bytes_read;
    }
    hits = engines[0]->stats().dram_hits + engines[1]->stats().dram_hits;
    const double gbs = 2.0 * shard_bytes / median(t);
    std::printf(
        "dram      restore both ranks %.0f ms (%.2f GB/s) | pinned H2D %.1f GB/s | ratio %.2f | "
        "disk bytes read %llu "
        "| tier hits %llu | %s\n",
        median(t) * 1e3, gbs / 1e9, h2d / 1e9, gbs / h2d, static_cast<unsigned long long>(read),
        static_cast<unsigned long long>(hits), exact ? "all tokens verified" : "INCOMPLETE");
    out["restore"]["dram"] = {{"restore_seconds", t},
                              {"ratio_to_pinned_h2d", gbs / h2d},
                              {"disk_bytes_read", read},
                              {"tier_hits", hits},
                              {"complete", exact}};
    engines.clear();
    for (Rank& r : ranks)
      for (void* p : r.layers) CHECK_CUDA(cudaFree(p));
  }

  // The scatter kernel alone: 1 GiB of device staging into the paged layout, vs D2D.
  {
    Rank r = make_rank(root, 0, tokens, "direct");
    KvLayoutParams p;
    const KvGeometry& g = r.options.geometry;
    p.form = KvForm::kPagedKvFirst;
    p.layers = g.layers;
    p.heads = g.kv_heads;
    p.head_bytes = g.head_dim * g.element_bytes;
    p.row_bytes = g.row_bytes();
    p.block_size = 16;
    p.num_blocks = r.view.num_blocks;
    void *bases, *table, *sums;
    CHECK_CUDA(cudaMalloc(&bases, r.layers.size() * sizeof(void*)));
    CHECK_CUDA(cudaMemcpy(bases, r.layers.data(), r.layers.size() * sizeof(void*),
                          cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc(&table, r.table.size() * 4));
    CHECK_CUDA(cudaMemcpy(table, r.table.data(), r.table.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc(&sums, 8 * 512));
    p.layer_base = static_cast<uint8_t* const*>(bases);
    p.block_table = static_cast<const int32_t*>(table);
    p.capacity_tokens = tokens;
    // Records of 256 tokens back to back in staging, as a restore delivers them.
    const uint64_t record = g.bytes_for_tokens(256);
    const uint64_t records = std::min<uint64_t>(big / record, tokens / 256);
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    std::vector<cuda::ScatterJob> jobs;
    for (uint64_t i = 0; i < records; ++i) {
      jobs.push_back(
          {static_cast<uint8_t*>(d0) + i * record,
           PieceSpan{i * record, 0, record, i * 256, 256, static_cast<uint32_t>(i % 512)}});
    }
    for (bool checksum : {true, false}) {
      std::vector<double> t;
      for (int rep = 0; rep < 6; ++rep) {
        CHECK_CUDA(cudaEventRecord(a));
        CHECK_CUDA(static_cast<cudaError_t>(
            cuda::launch_scatter(jobs.data(), jobs.size(), p,
                                 static_cast<unsigned long long*>(sums), nullptr, checksum)));
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        if (rep > 0) t.push_back(ms / 1e3);
      }
      const double scatter = 2.0 * static_cast<double>(records * record) / median(t);
      std::printf(
          "scatter kernel (staging -> paged [2,blocks,16,H,D]%s): %.0f GB/s read+write = %.2f x "
          "D2D\n",
          checksum ? ", checksum on the way" : ", no checksum (attribution only)", scatter / 1e9,
          scatter / d2d);
      out[checksum ? "scatter_gb_per_s" : "scatter_no_checksum_gb_per_s"] = scatter / 1e9;
      out[checksum ? "scatter_ratio_to_d2d" : "scatter_no_checksum_ratio_to_d2d"] = scatter / d2d;
    }
  }
  std::ofstream(argv[2]) << out.dump(2) << "\n";
  return 0;
}
