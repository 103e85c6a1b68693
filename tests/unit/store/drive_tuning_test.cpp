// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A drive's TUNING.json: what is written reads back, a missing one is no tuning, and anything that
// is not a read pattern is refused as corrupt rather than used.
#include "store/drive_tuning.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "test_util.hpp"

namespace kvtier {
namespace {

class DriveTuningFile : public ::testing::Test {
 protected:
  void put(const std::string& text) const { std::ofstream(dir_.path() / kTuningName) << text; }
  Result<std::optional<DriveTuning>> read() const {
    return read_drive_tuning(*fs_, dir_.path().string());
  }
  testing::TempDir dir_;
  std::shared_ptr<FileSystem> fs_ = FileSystem::posix();
};

TEST_F(DriveTuningFile, WhatIsWrittenReadsBack) {
  const DriveTuning t{4u << 20, 3, 5.5e9, "/x/seg-00000001.kvt", "2026-12-05T03:00:00Z"};
  ASSERT_TRUE(testing::is_ok(write_drive_tuning(*fs_, dir_.path().string(), t)));
  auto got = read();
  ASSERT_TRUE(got.has_value()) << got.error().to_string();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, t);
}

TEST_F(DriveTuningFile, NoFileIsNoTuning) {
  auto got = read();
  ASSERT_TRUE(got.has_value()) << got.error().to_string();
  EXPECT_FALSE(got->has_value());
}

TEST_F(DriveTuningFile, AnythingButAReadPatternIsCorrupt) {
  const char* bad[] = {
      "",
      "{",
      R"({"format": "kvtier-drive", "request_bytes": 4096, "in_flight": 1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "in_flight": 1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 0, "in_flight": 1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 5000, "in_flight": 1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 4096, "in_flight": 0, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 4096, "in_flight": -1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 2147483648, "in_flight": 1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": "4096", "in_flight": 1, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 4096, "in_flight": 4294967297, "bytes_per_second": 1})",
      R"({"format": "kvtier-drive-tuning", "request_bytes": 4096, "in_flight": 1025, "bytes_per_second": 1})",
  };
  for (const char* text : bad) {
    put(text);
    auto got = read();
    ASSERT_FALSE(got.has_value()) << text;
    EXPECT_EQ(got.error().code(), ErrorCode::kCorrupt) << text << ": " << got.error().to_string();
  }
}

}  // namespace
}  // namespace kvtier
