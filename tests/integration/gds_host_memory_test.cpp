// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// IoPath::kGds with KV in host memory, or without a GPU: never silent.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "host_session_test.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::HostKv;

class GdsHostMemoryTest : public testing::HostSessionTest {
 protected:
  Options options() const { return testing::small_options(dir_.str(), g_); }
};

// GPUDirect Storage moves GPU memory only: under IoPath::kGds, host KV takes the POSIX path, and
// the engine says so once (log and Stats::io_fallback) and counts every such transfer.
TEST_F(GdsHostMemoryTest, SaidOnceAndCountedPerTransfer) {
  std::mutex mu;
  std::vector<std::string> lines;
  Options o = options();
  o.io_path = IoPath::kGds;
  o.log_level = LogLevel::kWarn;
  o.log_sink = [&](LogLevel, std::string_view line) {
    std::lock_guard lock(mu);
    lines.emplace_back(line);
  };
  auto e = Engine::open(o);
  ASSERT_OK(e);
  const uint64_t at_open = (*e)->stats().fallbacks;
  const auto a = synthetic::tokens(77, 1300);
  const auto b = synthetic::tokens(78, 600);
  ASSERT_OK(save(**e, a));
  ASSERT_OK(save(**e, b));
  EXPECT_EQ(restored(**e, a), a.size());
  EXPECT_EQ(restored(**e, b), b.size());
  const Stats s = (*e)->stats();
  EXPECT_NE(s.io_fallback.find("I/O path gds"), std::string::npos) << s.io_fallback;
  EXPECT_NE(s.io_fallback.find("GPUDirect Storage"), std::string::npos) << s.io_fallback;
  EXPECT_EQ(s.fallbacks - at_open, 4u);
  int said = 0;
  for (const std::string& line : lines) said += line.find("I/O path gds") != std::string::npos;
  EXPECT_EQ(said, 1);

  Options direct = options();
  direct.io_path = IoPath::kDirect;
  e->reset();
  auto d = Engine::open(direct);
  ASSERT_OK(d);
  EXPECT_EQ(restored(**d, a), a.size());
  EXPECT_EQ((*d)->stats().io_fallback.find("gds"), std::string::npos);
}

}  // namespace
}  // namespace kvtier
