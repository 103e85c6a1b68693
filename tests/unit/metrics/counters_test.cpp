// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "metrics/counters.hpp"

#include <gtest/gtest.h>

#include "common/posix.hpp"
#include "test_util.hpp"

namespace kvtier::metrics {
namespace {

// Recorded on the dev box (Linux 6.18), trimmed.
constexpr std::string_view kDiskstats =
    "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    " 254       0 vda 1383349 141539 2291908706 13447865 233924 28957 177934184 397508 0 1154656 "
    "13873829 37426 8 197986784 25594 43292 2860\n"
    " 259       0 nvme0n1 100 0 800 5 7 0 56 1 0 3 6 0 0 0 0 0 0\n";

TEST(Diskstats, ReadsTheCountersOfOneDevice) {
  auto vda = parse_diskstats(kDiskstats, "vda");
  ASSERT_OK(vda);
  EXPECT_EQ(vda->reads, 1383349u);
  EXPECT_EQ(vda->sectors_read, 2291908706u);
  EXPECT_EQ(vda->bytes_read(), 2291908706ull * 512);
  EXPECT_EQ(vda->writes, 233924u);
  EXPECT_EQ(vda->sectors_written, 177934184u);
  EXPECT_EQ(parse_diskstats(kDiskstats, "nvme0n1")->bytes_read(), 800u * 512);
}

TEST(Diskstats, MissingDeviceAndGarbageAreErrors) {
  EXPECT_EQ(parse_diskstats(kDiskstats, "sdz").error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(parse_diskstats(kDiskstats, "vd").error().code(),
            ErrorCode::kNotFound);  // no prefix match
  EXPECT_EQ(parse_diskstats(" 8 0 sda x 0 0 0 0 0 0 0\n", "sda").error().code(),
            ErrorCode::kInvalidArgument);
}

TEST(ProcStat, MachineCpuBusyAndTotal) {
  auto c = parse_proc_stat(
      "cpu  303725 0 73144 969179 78239 0 2860 9789 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n");
  ASSERT_OK(c);
  EXPECT_EQ(c->busy, 303725u + 0 + 73144 + 0 + 2860 + 9789);
  EXPECT_EQ(c->total, c->busy + 969179 + 78239);
  EXPECT_FALSE(parse_proc_stat("intr 1 2 3\n").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu 1 2\n").has_value());
}

TEST(ProcStat, ProcessTicksSurviveAwkwardCommandNames) {
  // Fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime stime
  auto t =
      parse_process_ticks("4242 (kv (tier) x) R 1 2 3 0 -1 4194304 125 0 0 0 70 30 0 0 20 0 1\n");
  ASSERT_OK(t);
  EXPECT_EQ(*t, 100u);
  EXPECT_FALSE(parse_process_ticks("garbage").has_value());
}

TEST(Window, DeltaIsClippedToTheWindowEdgesByInterpolation) {
  // A counter sampled every second, growing 100/s until t=2, then 10/s.
  std::vector<Sample> s = {{0, 0}, {1, 100}, {2, 200}, {3, 210}, {4, 220}};
  EXPECT_DOUBLE_EQ(*delta_in_window(s, 1, 3), 110);
  EXPECT_DOUBLE_EQ(*delta_in_window(s, 0.5, 2.5), 155);  // 50 + 100 + 5
  EXPECT_DOUBLE_EQ(*delta_in_window(s, 2, 2), 0);
  EXPECT_FALSE(delta_in_window(s, -1, 2).has_value());  // before the first sample
  EXPECT_FALSE(delta_in_window(s, 1, 5).has_value());   // after the last
  std::vector<Sample> backwards = {{0, 0}, {2, 1}, {1, 2}};
  EXPECT_FALSE(delta_in_window(backwards, 0, 1).has_value());
}

TEST(Window, MedianOfOddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(*median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(*median({4, 1, 3, 2}), 2.5);
  EXPECT_FALSE(median({}).has_value());
}

TEST(BlockDevice, FindsTheDiskHoldingAPath) {
  auto dev = block_device_of("/proc/self");  // procfs has no block device
  EXPECT_FALSE(dev.has_value());
  testing::TempDir dir;
  auto disk = block_device_of(dir.str());
  if (!disk)
    GTEST_SKIP() << "no block device under the test directory: " << disk.error().to_string();
  auto text = read_file("/proc/diskstats");
  ASSERT_OK(text);
  EXPECT_OK(parse_diskstats(*text, *disk)) << *disk;
}

}  // namespace
}  // namespace kvtier::metrics
