// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cluster helper's tool runs: a tool that never ends is killed at its limit and said so, not
// waited for until ctest kills the whole test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "redis_cluster.hpp"

namespace kvtier::testing {
namespace {

TEST(RunTool, AToolPastItsLimitIsKilledAndItsRunSaysSo) {
  const auto t0 = std::chrono::steady_clock::now();
  const ToolRun run =
      run_tool({"sh", "-c", "echo started; exec sleep 60"}, std::chrono::milliseconds(2000));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(run.exit_code, 124);
  EXPECT_NE(run.output.find("started"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("killed: still running after 2000 ms"), std::string::npos)
      << run.output;
  EXPECT_LT(took, std::chrono::seconds(30));
}

// Allocations from call stacks seldom seen before: under TSan each records a new stack, taking a
// lock of its allocator that a fork may copy held into the child.
__attribute__((noinline)) void* descend(uint32_t path, int depth);
__attribute__((noinline)) void* ascend(uint32_t path, int depth) {
  if (depth == 0) return new char[64 + (path & 255)];
  void* p = (path & 1) != 0 ? descend(path >> 1, depth - 1) : ascend(path >> 1, depth - 1);
  asm volatile("" ::: "memory");  // keeps the call a call, not a jump
  return p;
}
__attribute__((noinline)) void* descend(uint32_t path, int depth) {
  if (depth == 0) return new char[32 + (path & 255)];
  void* p = (path & 1) != 0 ? ascend(path >> 1, depth - 1) : descend(path >> 1, depth - 1);
  asm volatile("" ::: "memory");
  return p;
}

// Tools start while other threads allocate (the engine's threads do, beside a test's cluster
// commands): a child that allocated between fork and exec could wait for ever on a lock such a
// thread held at the fork; none may. It can fail only where such a lock exists: under TSan (its
// allocator's stack depot), not with glibc's malloc, which fork handlers keep consistent.
TEST(RunTool, ToolsStartWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (uint32_t t = 0; t < 2; ++t) {
    busy.emplace_back([&stop, t] {
      std::mt19937 rng(t);
      while (!stop.load()) delete[] static_cast<char*>(descend(rng(), 20 + rng() % 10));
    });
  }
  int stuck = 0;
  for (int i = 0; i < 150; ++i)
    stuck += run_tool({"true"}, std::chrono::seconds(5)).exit_code == 124;
  stop = true;
  for (std::thread& t : busy) t.join();
  EXPECT_EQ(stuck, 0);
}

TEST(RunTool, AToolEndingInTimeKeepsItsExitCodeAndOutput) {
  const ToolRun run = run_tool({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.output.find("out"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("err"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace kvtier::testing
