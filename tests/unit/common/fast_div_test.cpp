// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "cuda/fast_div.hpp"

#include <gtest/gtest.h>

#include <random>

#include "test_util.hpp"

namespace kvtier::cuda {
namespace {

TEST(FastDiv, MatchesDivisionForEveryDivisorTheKernelsUse) {
  std::mt19937_64 rng(testing::test_seed());
  // Rows of 16-byte vectors, tokens per chunk, layers, block sizes, head vectors, and odd ones.
  for (uint32_t d : {1u, 2u, 3u, 7u, 8u, 16u, 32u, 48u, 80u, 96u, 100u, 255u, 256u, 1000u, 4096u,
                     65536u, 65537u, 1u << 20, (1u << 31) - 1}) {
    FastDiv f(d);
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, (1u << 31) - 1})
      ASSERT_EQ(f.div(n), n / d) << n << "/" << d;
    for (int i = 0; i < 100000; ++i) {
      const uint32_t n = static_cast<uint32_t>(rng() % (1u << 31));
      ASSERT_EQ(f.div(n), n / d) << n << "/" << d;
    }
  }
}

}  // namespace
}  // namespace kvtier::cuda
