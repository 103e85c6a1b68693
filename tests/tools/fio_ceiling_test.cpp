// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The benchmarks' independent ceiling: fio's replay log of a restore's reads, its JSON report read
// back, and real fio (tools/setup.sh installs it) reading real files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "fio_ceiling.hpp"
#include "test_util.hpp"

namespace kvtier::cli {
namespace {

TEST(FioIolog, SplitsEachExtentIntoRequestsOfTheGivenSizeInOrder) {
  const std::vector<FileExtent> extents = {{"/s/a", 0, 10 << 20}, {"/s/b", 4096, 8192}, {"/s/a", 64 << 20, 4 << 20}};
  EXPECT_EQ(fio_iolog(extents, 4 << 20),
            "fio version 2 iolog\n"
            "/s/a add\n/s/b add\n/s/a open\n/s/b open\n"
            "/s/a read 0 4194304\n/s/a read 4194304 4194304\n/s/a read 8388608 2097152\n"
            "/s/b read 4096 8192\n"
            "/s/a read 67108864 4194304\n"
            "/s/a close\n/s/b close\n");
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

TEST(FioReport, TheLongestJobIsTheReadsTime) {
  auto t = parse_fio_runtime(R"(note: both jobs
{"jobs": [{"jobname": "stream0", "error": 0, "job_runtime": 1200, "read": {"runtime": 0}},
          {"jobname": "stream1", "error": 0, "job_runtime": 1500, "read": {"runtime": 1400}}]})");
  ASSERT_OK(t);
  EXPECT_DOUBLE_EQ(*t, 1.5);
}

TEST(FioReport, AFailedJobNoJsonOrNoTimeIsAnError) {
  auto failed = parse_fio_runtime(R"({"jobs": [{"jobname": "s", "error": 5, "job_runtime": 10}]})");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), ErrorCode::kIo);
  EXPECT_FALSE(parse_fio_runtime("fio: engine io_uring not loadable"));
  EXPECT_FALSE(parse_fio_runtime(R"({"jobs": []})"));
  auto instant = parse_fio_runtime(R"({"jobs": [{"jobname": "s", "error": 0, "job_runtime": 0}]})");
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
  auto runs = fio->calibrate(streams, 4 << 20, {1, 4});
  ASSERT_OK(runs);
  ASSERT_EQ(runs->size(), 2u);
  const uint64_t want = (8 << 20) + (8 << 20) + 4096 + 2 * (uint64_t{32} << 20);
  for (const FioRead& r : *runs) {
    EXPECT_EQ(r.bytes, want);
    EXPECT_GT(r.seconds, 0);
  }
  EXPECT_TRUE(fio->depth() == 1 || fio->depth() == 4);
  EXPECT_FALSE(fio->engine().empty());
  // A range past a file's end is fio's error, reported, not a fast read.
  auto past = fio->read({{{streams[0][0].path, 64 << 20, 4 << 20}}}, 4 << 20, 1);
  EXPECT_FALSE(past);
}

}  // namespace
}  // namespace kvtier::cli
