// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The read probe against two emulated drives: the real reads run, and each completion is held back
// until a model of the drive says it would have finished. One model rewards requests in flight
// (many parallel channels, as NVMe has), the other punishes them (one channel that loses time
// switching between requests, as a drive that serialises and thrashes does).
#include "io/read_probe.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <thread>

#include "common/posix.hpp"
#include "modelled_drive.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

using testing::DriveModel;
using testing::ModelScope;
using testing::punishes_depth;
using testing::rewards_depth;

class ReadProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.path() / "probe";
    fd_ = UniqueFd(::open(path_.c_str(), O_RDWR | O_CREAT, 0644));
    ASSERT_GE(fd_.get(), 0);
    std::vector<std::byte> data(kFileBytes);
    std::mt19937_64 rng(20261204);
    for (auto& b : data) b = static_cast<std::byte>(rng());
    ASSERT_EQ(::pwrite(fd_.get(), data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  }

  // Small sizes keep a sweep under a second or two of modelled time.
  static ProbeConfig small_sweep() {
    ProbeConfig c;
    c.request_sizes = {64u << 10, 256u << 10, 1u << 20};
    c.in_flight = {1, 2, 4, 8};
    c.max_staging_bytes = 8u << 20;
    c.bytes_per_trial = 4u << 20;
    c.path = IoPath::kBuffered;
    return c;
  }

  static constexpr uint64_t kFileBytes = 8u << 20;
  testing::TempDir dir_;
  std::filesystem::path path_;
  UniqueFd fd_;
};

std::string rates_of(const ProbeReport& report) {
  std::string out = "chose " + std::to_string(report.best.request_bytes >> 10) + "K x " +
                    std::to_string(report.best.in_flight) + "; tried:";
  for (const PatternRate& r : report.rates) {
    out += " " + std::to_string(r.pattern.request_bytes >> 10) + "Kx" +
           std::to_string(r.pattern.in_flight) + "=" +
           std::to_string(static_cast<int>(r.bytes_per_second / 1e6)) + "MB/s";
  }
  return out;
}

TEST_F(ReadProbe, PicksManyRequestsInFlightWhereTheDriveRewardsDepth) {
  ModelScope scope(rewards_depth());
  auto report = probe_read_patterns(fd_.get(), kFileBytes, small_sweep());
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  EXPECT_GE(report->best.in_flight, 4u) << rates_of(*report);
}

TEST_F(ReadProbe, PicksOneRequestInFlightWhereTheDrivePunishesDepth) {
  ModelScope scope(punishes_depth());
  auto report = probe_read_patterns(fd_.get(), kFileBytes, small_sweep());
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  EXPECT_EQ(report->best.in_flight, 1u) << rates_of(*report);
  EXPECT_EQ(report->best.request_bytes, 1u << 20) << rates_of(*report);
}

TEST_F(ReadProbe, TriesEveryPatternWithinTheStagingBoundAndConfirmsTheBest) {
  ModelScope scope(rewards_depth());
  ProbeConfig c = small_sweep();
  c.max_staging_bytes = 1u << 20;
  auto report = probe_read_patterns(fd_.get(), kFileBytes, c);
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  // 64K x 1..8 (all fit 1 MiB), 256K x 1..4, 1M x 1: 4 + 3 + 1 = 8 trials, then 3 confirmations.
  ASSERT_EQ(report->rates.size(), 8u + c.confirm);
  for (const PatternRate& r : report->rates) {
    EXPECT_LE(r.pattern.staging_bytes(), c.max_staging_bytes);
    EXPECT_GT(r.bytes_per_second, 0);
  }
  EXPECT_LE(report->best.staging_bytes(), c.max_staging_bytes);
}

TEST_F(ReadProbe, WithoutConfirmationsRanksEveryTrialByItsOneRun) {
  ModelScope scope(rewards_depth());
  ProbeConfig c = small_sweep();
  c.max_staging_bytes = 1u << 20;
  c.confirm = 0;
  auto report = probe_read_patterns(fd_.get(), kFileBytes, c);
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  ASSERT_EQ(report->rates.size(), 8u);  // the sweep of the test above, nothing run twice
  EXPECT_NE(std::find_if(report->rates.begin(), report->rates.end(),
                         [&](const PatternRate& r) { return r.pattern == report->best; }),
            report->rates.end())
      << rates_of(*report);
  EXPECT_GE(report->best.in_flight, 4u) << rates_of(*report);
}

TEST_F(ReadProbe, FailsWithTheDrivesErrorWhenAReadFails) {
  DriveModel failing = rewards_depth();
  failing.fail_at = 5;
  ModelScope scope(failing);
  auto report = probe_read_patterns(fd_.get(), kFileBytes, small_sweep());
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().code(), ErrorCode::kIo) << report.error().to_string();
}

TEST_F(ReadProbe, RefusesAFileSmallerThanEveryRequestSize) {
  ProbeConfig c = small_sweep();
  c.request_sizes = {16u << 20};
  auto report = probe_read_patterns(fd_.get(), kFileBytes, c);
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(report.error().message().find("no request size"), std::string::npos);
}

TEST_F(ReadProbe, ReadsARealFileWithODirect) {
  UniqueFd direct(::open(path_.c_str(), O_RDONLY | O_DIRECT));
  if (direct.get() < 0 && errno == EINVAL) GTEST_SKIP() << "no O_DIRECT on " << path_;
  ASSERT_GE(direct.get(), 0);
  ProbeConfig c = small_sweep();
  c.path = IoPath::kDirect;
  auto report = probe_read_patterns(direct.get(), kFileBytes, c);
  ASSERT_TRUE(report.has_value()) << report.error().to_string();
  EXPECT_GT(report->best.in_flight, 0u);
  EXPECT_FALSE(report->rates.empty());
}

}  // namespace
}  // namespace kvtier
