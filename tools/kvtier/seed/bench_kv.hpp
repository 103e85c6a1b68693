// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// One rank's paged KV cache for the seed benchmark, in GPU memory (CUDA) or host memory (the
// host-emulated device): per layer vLLM's flash-attention tensor [2, num_blocks, 16, kv_heads,
// head_dim], blocks handed out in a shuffled order as a serving engine's allocator would. Its
// addressing is written here independently of kvtier's layout code, so a layout bug in kvtier
// shows up as a mismatch rather than cancelling out.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kv_source.hpp"
#include "kvtier/kvtier.hpp"

namespace kvtier::seed {

class BenchKv {
 public:
  /// `device`: "host", "cuda" or "auto" (CUDA where a GPU is usable, else host). `gpu`: CUDA
  /// device. `kv`: the KV prefill writes and first_mismatch expects: random synthetic words, their
  /// compressible form (synthetic::bf16_like_word), or a file's KV tiled (kv_file_rows.hpp), which
  /// must fit `g` (kv_file_fits).
  [[nodiscard]] static Result<std::unique_ptr<BenchKv>> create(const KvGeometry& g,
                                                               uint64_t max_tokens,
                                                               std::string_view device, int gpu,
                                                               const KvSource& kv = {});
  virtual ~BenchKv() = default;
  /// "cuda:0 (NVIDIA H200)" or "host (host-emulated device)".
  [[nodiscard]] virtual std::string describe() const = 0;
  /// The GPU's PCI bus id (for NVML); empty for host memory.
  [[nodiscard]] virtual std::string pci_bus_id() const = 0;
  [[nodiscard]] virtual const PagedKv& view() const = 0;
  /// The model's prefill, stood in for: writes the KV of `ids` (synthetic, or tiled from a file)
  /// into the cache.
  [[nodiscard]] virtual Status prefill(std::span<const Token> ids) = 0;
  /// Overwrites the whole cache, so nothing of an earlier session survives into a restore.
  [[nodiscard]] virtual Status poison() = 0;
  /// Copies `bytes` from pinned host memory into device memory (a scratch buffer, not the cache) in
  /// 256 MiB pieces on one stream: the link's ceiling for a DRAM-tier restore of that many bytes.
  /// Host memory: the same through memcpy. Returns seconds.
  [[nodiscard]] virtual Result<double> copy_ceiling(uint64_t bytes) = 0;
  /// What copy_ceiling() measures, for reports.
  [[nodiscard]] virtual std::string copy_ceiling_name() const = 0;
  /// First token whose KV differs from what prefill(ids) writes in any layer, or ids.size().
  [[nodiscard]] virtual Result<uint64_t> first_mismatch(std::span<const Token> ids) = 0;
};

/// Block size of the benchmark's paged cache (vLLM's default).
inline constexpr uint32_t kBenchBlockSize = 16;

/// A shuffled block table of `blocks` entries, the same for every run of `blocks`.
std::vector<int32_t> shuffled_blocks(uint32_t blocks);

/// The CUDA implementation; kNotSupported where this build or machine has no usable GPU.
Result<std::unique_ptr<BenchKv>> make_cuda_bench_kv(const KvGeometry& g, uint64_t max_tokens,
                                                    int gpu, const KvSource& kv);

}  // namespace kvtier::seed
