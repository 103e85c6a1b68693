// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// How many threads consume a read's pieces: the cores into host memory, a thread a staging slot
// into a device, what KVTIER_CONSUMER_THREADS says when it says (options_test.cpp: its parsing).
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "engine/read_route.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

TEST(ConsumerThreads, TheCoresIntoHostMemoryAndOneASlotIntoADevice) {
  const unsigned cores = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  for (size_t slots : {size_t{1}, size_t{3}, size_t{10}, size_t{38}, size_t{64}, size_t{600}}) {
    SCOPED_TRACE(slots);
    EXPECT_EQ(consumer_threads(false, slots, std::nullopt), cores);
    EXPECT_EQ(consumer_threads(true, slots, std::nullopt), std::clamp<size_t>(slots, cores, 64));
    EXPECT_EQ(consumer_threads(true, slots, 3), 3u);
    EXPECT_EQ(consumer_threads(false, slots, 7), 7u);
  }
}

}  // namespace
}  // namespace kvtier
