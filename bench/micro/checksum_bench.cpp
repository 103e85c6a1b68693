// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Host throughput of the payload checksum and the fused copy+checksum the restore path runs,
// against plain memcpy of the same bytes (the floor the fused loop is measured against).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "common/aligned_buffer.hpp"
#include "common/checksum.hpp"
#include "common/keys.hpp"

namespace kvtier {
namespace {

constexpr size_t kBytes = 8 << 20;  // one staging slot

void BM_Kvsum(benchmark::State& state) {
  AlignedBuffer buf(kBytes);
  std::memset(buf.data(), 0x5a, kBytes);
  for (auto _ : state) benchmark::DoNotOptimize(kvsum::partial(buf.data(), kBytes, 0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_Kvsum);

void BM_KvsumCopy(benchmark::State& state) {
  AlignedBuffer src(kBytes), dst(kBytes);
  std::memset(src.data(), 0x5a, kBytes);
  for (auto _ : state)
    benchmark::DoNotOptimize(kvsum::copy_partial(dst.data(), src.data(), kBytes, 0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_KvsumCopy);

void BM_Memcpy(benchmark::State& state) {
  AlignedBuffer src(kBytes), dst(kBytes);
  std::memset(src.data(), 0x5a, kBytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}
BENCHMARK(BM_Memcpy);

void BM_ChainKeys100K(benchmark::State& state) {
  std::vector<Token> tokens(100000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<Token>(i * 7919 % 151936);
  KvGeometry g{"bench", 48, 2, 128, 2, 256, 0, 2};
  const Key128 ns = namespace_key(g, "");
  for (auto _ : state) benchmark::DoNotOptimize(chain_keys(ns, tokens, 256));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * tokens.size()));
}
BENCHMARK(BM_ChainKeys100K);

}  // namespace
}  // namespace kvtier

BENCHMARK_MAIN();
