// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The CUDA split16 decoder against the host codec: the same streams decode to the same bytes on
// the GPU, and a block whose data contradicts its table is flagged, not decoded. Skipped where
// there is no CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "codec/split16.hpp"
#include "cuda/split16_decode.hpp"
#include "have_gpu.hpp"

namespace kvtier {
namespace {

using Bytes = std::vector<std::byte>;

Bytes kv_like(size_t words, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, sigma);
  Bytes out(words * 2);
  for (size_t i = 0; i < words; ++i) {
    const uint16_t w = static_cast<uint16_t>(std::bit_cast<uint32_t>(d(rng)) >> 16);
    std::memcpy(out.data() + 2 * i, &w, 2);
  }
  return out;
}

Bytes encode(const Bytes& raw) {
  Bytes out(codec::split16_bound(raw.size()));
  auto n = codec::split16_encode(raw, out);
  EXPECT_TRUE(n.has_value());
  out.resize(n.value_or(0));
  return out;
}

/// Decodes `stored` on the GPU; returns the decoded bytes and whether a block was flagged.
std::pair<Bytes, bool> gpu_decode(const Bytes& stored) {
  auto table = codec::split16_table(stored);
  EXPECT_TRUE(table.has_value());
  const size_t data_bytes = stored.size() - table->data_offset;
  const size_t blocks = table->blocks.size();
  uint8_t *data = nullptr, *out = nullptr;
  codec::Split16Block* dev_blocks = nullptr;
  unsigned int* bad = nullptr;
  EXPECT_EQ(cudaMalloc(&data, data_bytes + 1), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&out, table->decoded_bytes + 2), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dev_blocks, blocks * sizeof(codec::Split16Block) + 1), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&bad, sizeof(unsigned int)), cudaSuccess);
  EXPECT_EQ(cudaMemset(out, 0xEE, table->decoded_bytes + 2), cudaSuccess);
  EXPECT_EQ(cudaMemset(bad, 0, sizeof(unsigned int)), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpy(data, stored.data() + table->data_offset, data_bytes, cudaMemcpyHostToDevice),
      cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev_blocks, table->blocks.data(), blocks * sizeof(codec::Split16Block),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cuda::launch_split16_decode(dev_blocks, static_cast<uint32_t>(blocks), data, out, bad,
                                        nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Bytes back(table->decoded_bytes);
  unsigned int flagged = 0;
  EXPECT_EQ(
      cudaMemcpy(back.data(), out, table->decoded_bytes & ~uint64_t{1}, cudaMemcpyDeviceToHost),
      cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&flagged, bad, sizeof flagged, cudaMemcpyDeviceToHost), cudaSuccess);
  if (back.size() % 2) back.back() = std::byte{table->tail};
  cudaFree(data);
  cudaFree(out);
  cudaFree(dev_blocks);
  cudaFree(bad);
  return {back, flagged != 0};
}

/// A flagged block's words are left as gpu_decode's fill (0xEE); every other block decoded.
void expect_only_block_unwritten(const Bytes& back, const Bytes& raw,
                                 const codec::Split16Block& b) {
  ASSERT_EQ(back.size(), raw.size());
  for (size_t i = 0; i < back.size(); ++i) {
    const bool in_block = i >= b.out_offset && i < b.out_offset + size_t{b.words} * 2;
    ASSERT_EQ(back[i], in_block ? std::byte{0xEE} : raw[i]) << "byte " << i;
  }
}

TEST(Split16Gpu, DecodesWhatTheHostEncodedByteForByte) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  const uint64_t seed = 20261204;
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::vector<size_t> sizes = {2, 8190, 8192, 8194, 3 * 8192 + 7, 1 << 20};
  for (int i = 0; i < 20; ++i) sizes.push_back(2 + rng() % (6 * 8192));
  for (size_t bytes : sizes) {
    for (float sigma : {1e-3f, 0.5f, 100.0f}) {
      Bytes raw = kv_like(bytes / 2, sigma, rng);
      if (bytes % 2) raw.push_back(static_cast<std::byte>(rng()));
      auto [back, bad] = gpu_decode(encode(raw));
      EXPECT_FALSE(bad);
      ASSERT_EQ(back, raw) << bytes << " bytes, sigma " << sigma;
    }
    Bytes noise(bytes);
    for (auto& b : noise) b = static_cast<std::byte>(rng());
    auto [back, bad] = gpu_decode(encode(noise));
    EXPECT_FALSE(bad);
    ASSERT_EQ(back, noise);
  }
}

TEST(Split16Gpu, FlagsABlockWhoseEscapesContradictItsTable) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(5);
  const Bytes raw = kv_like(3 * 4096, 1.0f, rng);
  Bytes stored = encode(raw);
  auto table = codec::split16_table(stored);
  ASSERT_TRUE(table.has_value());
  const auto& b = table->blocks[1];
  ASSERT_EQ(b.mode, codec::kSplit16Coded);
  stored[table->data_offset + b.offset] ^= std::byte{1};  // its escape count, not in the table
  Bytes host(raw.size());
  EXPECT_FALSE(codec::split16_decode(stored, host).ok());
  auto [back, bad] = gpu_decode(stored);
  EXPECT_TRUE(bad);
  expect_only_block_unwritten(back, raw, b);
}

TEST(Split16Gpu, FlagsABlockWithACodeOutsideItsCodebookAndWritesNoneOfItsWords) {
  if (!testing::have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(6);
  Bytes raw = kv_like(4096, 1.0f, rng);
  // A second block of two exponents: 2-bit codes into a codebook of 2, so code 2 is in none.
  for (int i = 0; i < 4096; ++i) {
    const uint16_t w = static_cast<uint16_t>((rng() % 2 ? 0x3f00 : 0x3f80) | (rng() & 0x807f));
    raw.push_back(static_cast<std::byte>(w & 0xff));
    raw.push_back(static_cast<std::byte>(w >> 8));
  }
  Bytes stored = encode(raw);
  auto table = codec::split16_table(stored);
  ASSERT_TRUE(table.has_value());
  const auto& b = table->blocks[1];
  ASSERT_EQ(b.mode, codec::kSplit16Coded);
  ASSERT_EQ(b.bits, 2);
  ASSERT_EQ(b.codebook, 2);
  // Word 0's code (the first byte's low 2 bits) becomes 2: thread 0 finds it, the others do not.
  std::byte& first_codes = stored[table->data_offset + b.offset + 4 + b.codebook];
  first_codes = (first_codes & std::byte{0xfc}) | std::byte{2};
  Bytes host(raw.size());
  EXPECT_FALSE(codec::split16_decode(stored, host).ok());
  auto [back, bad] = gpu_decode(stored);
  EXPECT_TRUE(bad);
  expect_only_block_unwritten(back, raw, b);
}

}  // namespace
}  // namespace kvtier
