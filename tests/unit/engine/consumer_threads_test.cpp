// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// How many threads consume a read's pieces: the cores, up to 4, or what KVTIER_CONSUMER_THREADS
// says when it says (options_test.cpp: its parsing).
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "engine/read_route.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

TEST(ConsumerThreads, TheCoresUpToFourOrWhatIsSet) {
  EXPECT_EQ(consumer_threads(std::nullopt),
            std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  for (uint32_t set : {1u, 3u, 7u, 64u, 256u}) EXPECT_EQ(consumer_threads(set), set);
}

}  // namespace
}  // namespace kvtier
