// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// 16 threads mixing save, lookup, restore and evict on one store under a capacity small enough to
// evict all the time, for KVTIER_STRESS_SECONDS (default 3). Invariants: every restored byte is
// right (no torn read), the store never exceeds its capacity, the engine's counters match the calls
// made, and a final verify finds nothing corrupt.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::HostKv;

TEST(Stress, SixteenThreadsMixingEveryOperationKeepTheInvariants) {
  testing::TempDir dir;
  const KvGeometry g = testing::tiny_geometry();
  Options o = testing::small_options(dir.str(), g);
  o.capacity_bytes = 64 << 20;  // four 16 MiB segments: ~60 chunks of 256 KiB
  o.segment_bytes = 16 << 20;
  auto opened = Engine::open(o);
  ASSERT_OK(opened);
  Engine& e = **opened;

  // 48 sessions; half share a prefix with another, so lookups and saves meet partial chains.
  std::vector<std::vector<Token>> sessions;
  std::mt19937_64 rng(testing::test_seed());
  for (int s = 0; s < 48; ++s) {
    auto t = synthetic::tokens(1000 + s, 300 + rng() % 2700);
    if (s % 2 == 1) {
      const auto& base = sessions.back();
      std::copy(base.begin(), base.begin() + std::min(base.size(), t.size()) / 2, t.begin());
    }
    sessions.push_back(std::move(t));
  }

  const char* env = std::getenv("KVTIER_STRESS_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 3.0;
  const auto stop_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::atomic<uint64_t> saves{0}, lookups{0}, restores{0}, evicts{0}, torn{0}, over_capacity{0},
      errors{0};
  std::atomic<uint64_t> restored_tokens{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 r(testing::test_seed() + t);
      while (std::chrono::steady_clock::now() < stop_at) {
        const auto& tokens = sessions[r() % sessions.size()];
        switch (r() % 4) {
          case 0: {
            HostKv kv(g, tokens.size());
            synthetic::fill_kv(g, tokens, kv.span(), tokens.size());
            ++saves;
            auto s = e.save(tokens, kv.view);
            // Full is an answer (every segment pinned by restores in flight), not a failure.
            if (!s && s.error().code() != ErrorCode::kCapacity) ++errors;
            break;
          }
          case 1:
            ++lookups;
            if (!e.lookup(tokens)) ++errors;
            break;
          case 2: {
            HostKv kv(g, tokens.size());
            ++restores;
            auto res = e.restore(tokens, kv.view);
            if (!res) {
              ++errors;
              break;
            }
            const uint64_t n = res->tokens_restored;
            if (synthetic::first_mismatch(g, std::span(tokens).first(n), kv.span(),
                                          tokens.size()) != n)
              ++torn;
            restored_tokens += n;
            break;
          }
          case 3:
            ++evicts;
            if (!e.evict(tokens)) ++errors;
            break;
        }
        if (e.stats().used_bytes > o.capacity_bytes) ++over_capacity;
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(torn.load(), 0u) << "a restore handed back bytes that were not the session's";
  EXPECT_EQ(over_capacity.load(), 0u);
  EXPECT_EQ(errors.load(), 0u);
  const Stats s = e.stats();
  EXPECT_EQ(s.saves, saves.load());
  EXPECT_EQ(s.lookups, lookups.load());
  EXPECT_EQ(s.restores, restores.load());
  EXPECT_EQ(s.checksum_misses, 0u);
  EXPECT_GT(restored_tokens.load(), 0u)
      << "the mix never restored anything: the test proves nothing";
  EXPECT_GT(s.evicted_segments + s.evicted_records, 0u);
  auto report = e.verify();
  ASSERT_OK(report);
  EXPECT_EQ(report->corrupt_records, 0u);
  std::printf(
      "stress: %.1f s, %llu saves, %llu lookups, %llu restores (%llu tokens), %llu evicts, "
      "%llu segments evicted\n",
      seconds, (unsigned long long)saves.load(), (unsigned long long)lookups.load(),
      (unsigned long long)restores.load(), (unsigned long long)restored_tokens.load(),
      (unsigned long long)evicts.load(), (unsigned long long)s.evicted_segments);
}

}  // namespace
}  // namespace kvtier
