// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cluster helper's tool runs: a tool that never ends is killed at its limit and said so, not
// waited for until ctest kills the whole test.
#include <gtest/gtest.h>

#include <chrono>

#include "redis_cluster.hpp"

namespace kvtier::testing {
namespace {

TEST(RunTool, AToolPastItsLimitIsKilledAndItsRunSaysSo) {
  const auto t0 = std::chrono::steady_clock::now();
  const ToolRun run =
      run_tool({"sh", "-c", "echo started; exec sleep 60"}, std::chrono::milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(run.exit_code, 124);
  EXPECT_NE(run.output.find("started"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("killed: still running after 300 ms"), std::string::npos) << run.output;
  EXPECT_LT(took, std::chrono::seconds(30));
}

TEST(RunTool, AToolEndingInTimeKeepsItsExitCodeAndOutput) {
  const ToolRun run = run_tool({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.output.find("out"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("err"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace kvtier::testing
