// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "common/checksum.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "test_util.hpp"

namespace kvtier {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

TEST(Kvsum, PartialSumsOfAnySplitAddUpToTheWhole) {
  auto data = random_bytes(64 * 1024 + 24, testing::test_seed());
  const uint64_t whole = kvsum::of(data.data(), data.size());
  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 50; ++trial) {
    // Cut at random 8-byte boundaries and sum the pieces in reverse order.
    std::vector<size_t> cuts = {0, data.size()};
    for (int c = 0; c < 5; ++c) cuts.push_back((rng() % (data.size() / 8)) * 8);
    std::sort(cuts.begin(), cuts.end());
    uint64_t sum = 0;
    for (size_t i = cuts.size() - 1; i > 0; --i) {
      sum += kvsum::partial(data.data() + cuts[i - 1], cuts[i] - cuts[i - 1], cuts[i - 1] / 8);
    }
    EXPECT_EQ(kvsum::finish(sum, data.size()), whole);
  }
}

TEST(Kvsum, CopyPartialCopiesAndSumsLikePartial) {
  auto data = random_bytes(300 * 1024, 7);
  std::vector<std::byte> dst(data.size());
  const uint64_t a = kvsum::copy_partial(dst.data(), data.data(), data.size(), 3);
  EXPECT_EQ(a, kvsum::partial(data.data(), data.size(), 3));
  EXPECT_EQ(dst, data);
}

TEST(Kvsum, EverySingleBitFlipChangesTheChecksum) {
  auto data = random_bytes(4096, 11);
  const uint64_t good = kvsum::of(data.data(), data.size());
  for (size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= std::byte{1} << (bit % 8);
    ASSERT_NE(kvsum::of(data.data(), data.size()), good) << "bit " << bit;
    data[bit / 8] ^= std::byte{1} << (bit % 8);
  }
}

TEST(Kvsum, SwappedWordsAndLengthChangesAreDetected) {
  auto data = random_bytes(1024, 5);
  const uint64_t good = kvsum::of(data.data(), data.size());
  std::swap_ranges(data.begin(), data.begin() + 8, data.begin() + 8);
  EXPECT_NE(kvsum::of(data.data(), data.size()), good);
  std::vector<std::byte> zeros(4096);
  EXPECT_NE(kvsum::of(zeros.data(), 4096), kvsum::of(zeros.data(), 4088));
}

TEST(Kvsum, TailShorterThanAWordIsZeroPadded) {
  std::vector<std::byte> data(13, std::byte{0xab});
  std::vector<std::byte> padded(16, std::byte{0});
  std::copy(data.begin(), data.end(), padded.begin());
  EXPECT_EQ(kvsum::partial(data.data(), 13, 0), kvsum::partial(padded.data(), 16, 0));
}

// Pins the algorithm: a change here breaks every store written before it and the GPU kernel.
TEST(Kvsum, KnownValueIsStable) {
  std::vector<std::byte> data(256);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
  EXPECT_EQ(kvsum::of(data.data(), data.size()), 0xd4e703d171eedf69ULL);
  EXPECT_EQ(kvsum::mix(0), 0u);
  EXPECT_EQ(kvsum::mix(1), 0xb456bcfc34c2cb2cULL);
}

}  // namespace
}  // namespace kvtier
