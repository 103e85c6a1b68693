// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The benchmarks' independent ceiling: fio's job file for a restore's reads, its JSON report read
// back, and real fio (tools/setup.sh installs it) reading real files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "fio_ceiling.hpp"
#include "test_util.hpp"

namespace kvtier::cli {
namespace {

TEST(FioJobFile, EachExtentIsAJobChainedAfterItsStreamsPreviousTailsApart) {
  const std::vector<std::vector<FileExtent>> streams = {
      {{"/s/a", 0, 10 << 20}, {"/s/b:c", 4096, 8192}}, {{"/t/d", 1 << 20, 8 << 20}}};
  std::vector<FioJob> jobs;
  auto file = fio_job_file(streams, 4 << 20, 8, "io_uring", jobs);
  ASSERT_OK(file);
  EXPECT_EQ(
      *file,
      "[global]\nioengine=io_uring\ndirect=1\nrw=read\nallow_file_create=0\n"
      "[s0e0]\nfilename=/s/a\noffset=0\nsize=8388608\nbs=4194304\niodepth=8\n"
      "[s0e0t]\nfilename=/s/a\noffset=8388608\nsize=2097152\nbs=2097152\niodepth=1\nwait_for=s0e0\n"
      "[s0e1t]\nfilename=/s/b\\:c\noffset=4096\nsize=8192\nbs=8192\niodepth=1\nwait_for=s0e0t\n"
      "[s1e0]\nfilename=/t/d\noffset=1048576\nsize=8388608\nbs=4194304\niodepth=8\n");
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[2].name, "s0e1t");
  EXPECT_EQ(jobs[2].bytes, 8192u);
  EXPECT_EQ(jobs[3].stream, 1u);
  EXPECT_FALSE(fio_job_file({{{"/a\nb", 0, 4096}}}, 4096, 1, "io_uring", jobs));
  EXPECT_FALSE(fio_job_file({{}}, 4096, 1, "io_uring", jobs));
}

TEST(FioSplit, ExtentsGoToOneStreamPerDeviceInOrder) {
  testing::TempDir dir;
  for (const char* f : {"/a", "/b"}) std::ofstream(dir.str() + f) << "x";
  // /proc is another file system than the test directory: a second "drive".
  const std::vector<FileExtent> extents = {
      {dir.str() + "/a", 0, 4096}, {"/proc/self/stat", 0, 4096}, {dir.str() + "/b", 8192, 4096}};
  auto streams = split_by_device(extents);
  ASSERT_EQ(streams.size(), 2u);
  ASSERT_EQ(streams[0].size(), 2u);
  EXPECT_EQ(streams[0][1].path, dir.str() + "/b");
  EXPECT_EQ(streams[0][1].offset, 8192u);
  ASSERT_EQ(streams[1].size(), 1u);
  EXPECT_EQ(streams[1][0].path, "/proc/self/stat");
}

TEST(FioReport, AStreamsTimeIsItsJobsSumAndTheSlowestStreamIsTheReads) {
  const std::vector<FioJob> jobs = {{"s0e0", 0, 100}, {"s0e0t", 0, 4}, {"s1e0", 1, 50}};
  auto t = parse_fio_report(R"(note: three jobs
{"jobs": [{"jobname": "s0e0", "error": 0, "job_runtime": 1200, "read": {"io_bytes": 100},
           "usr_cpu": 1.0, "sys_cpu": 24.0},
          {"jobname": "s0e0t", "error": 0, "job_runtime": 100, "read": {"io_bytes": 4},
           "usr_cpu": 0.0, "sys_cpu": 50.0},
          {"jobname": "s1e0", "error": 0, "job_runtime": 1250, "read": {"io_bytes": 50}}]})",
                            jobs);
  ASSERT_OK(t);
  EXPECT_DOUBLE_EQ(t->seconds, 1.3);
  // 25% of 1.2 s, 50% of 0.1 s, and nothing reported for the third job.
  EXPECT_DOUBLE_EQ(t->cpu_seconds, 0.35);
}

TEST(FioReport, AShortReadAFailedOrMissingJobNoJsonOrNoTimeIsAnError) {
  const std::vector<FioJob> one = {{"s0e0", 0, 100}};
  // A job that read less than its bytes (as fio's replay of a log does at depth > 1) is no ceiling.
  auto short_read = parse_fio_report(R"({"jobs": [{"jobname": "s0e0", "error": 0, "job_runtime": 9,
                                          "read": {"io_bytes": 60}}]})",
                                     one);
  ASSERT_FALSE(short_read);
  EXPECT_NE(short_read.error().message().find("read 60 bytes of 100"), std::string::npos);
  auto failed =
      parse_fio_report(R"({"jobs": [{"jobname": "s0e0", "error": 5, "job_runtime": 10}]})", one);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), ErrorCode::kIo);
  EXPECT_FALSE(parse_fio_report(R"({"jobs": []})", one));
  auto no_json = parse_fio_report("fio: engine io_uring not loadable\n", one);
  ASSERT_FALSE(no_json);
  EXPECT_NE(no_json.error().message().find("fio: engine io_uring not loadable"), std::string::npos);
  auto instant = parse_fio_report(R"({"jobs": [{"jobname": "s0e0", "error": 0, "job_runtime": 0,
                                       "read": {"io_bytes": 100}}]})",
                                  one);
  ASSERT_FALSE(instant);
  EXPECT_NE(instant.error().message().find("too short"), std::string::npos);
}

TEST(FioCeiling, AMissingFioSaysHowToGetIt) {
  testing::TempDir dir;
  auto f = FioCeiling::find(dir.str() + "/no-such-fio", dir.str());
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code(), ErrorCode::kNotFound);
  EXPECT_NE(f.error().message().find("apt install fio"), std::string::npos);
}

// Real fio on real files: the ranges of two "ranks" at once, every byte of them counted. Fails
// where fio is not installed: tools/setup.sh installs it, and the benchmarks need it.
TEST(FioCeiling, RealFioReadsTheGivenRangesOfRealFiles) {
  testing::TempDir dir;
  std::vector<std::vector<FileExtent>> streams(2);
  std::mt19937_64 rng(testing::test_seed());
  std::vector<char> block(1 << 20);
  for (int r = 0; r < 2; ++r) {
    const std::string path = dir.str() + "/seg" + std::to_string(r);
    std::ofstream out(path, std::ios::binary);
    for (int m = 0; m < 48; ++m) {
      for (auto& c : block) c = static_cast<char>(rng());
      out.write(block.data(), static_cast<std::streamsize>(block.size()));
    }
    out.close();
    // Two ranges per file, 4 KiB aligned, the second ending at the file's end.
    streams[r].push_back({path, 4096, (8 << 20) + 4096 * static_cast<uint64_t>(r)});
    streams[r].push_back({path, 16 << 20, 32 << 20});
  }
  auto fio = FioCeiling::find("fio", dir.str() + "/fio");
  ASSERT_OK(fio) << "install fio (tools/setup.sh does)";
  EXPECT_NE(fio->version().find("fio-"), std::string::npos);
  // Depth 64 is more than either stream has requests: fio must still read (and be timed reading)
  // every byte, which parse_fio_report checks per job.
  auto runs = fio->calibrate(streams, 4 << 20, {1, 4, 64});
  ASSERT_OK(runs);
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[2].depth, 64u);
  const uint64_t want = (8 << 20) + (8 << 20) + 4096 + 2 * (uint64_t{32} << 20);
  for (const FioRead& r : *runs) {
    EXPECT_EQ(r.bytes, want);
    EXPECT_GT(r.seconds, 0);
  }
  EXPECT_TRUE(fio->depth() == 1 || fio->depth() == 4 || fio->depth() == 64);
  EXPECT_FALSE(fio->engine().empty());
  // A range past a file's end is an error, never a fast read, and fio does not extend the file.
  auto past = fio->read({{{streams[0][0].path, 64 << 20, 4 << 20}}}, 4 << 20, 1);
  EXPECT_FALSE(past);
  EXPECT_EQ(std::filesystem::file_size(streams[0][0].path), uint64_t{48} << 20);
}

}  // namespace
}  // namespace kvtier::cli
