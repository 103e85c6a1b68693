// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "metrics/memory_traffic.hpp"
#include "metrics/pcie.hpp"
#include "test_util.hpp"

namespace kvtier::metrics {
namespace {

TEST(UnwrappedCounter, AddsIncrementsAcrossWraps) {
  UnwrappedCounter c(32);
  EXPECT_EQ(c.add(4294967000u), 0);  // the first reading is the origin
  EXPECT_EQ(c.add(4294967295u), 295);
  EXPECT_EQ(c.add(100), 295 + 101);  // wrapped once
  EXPECT_EQ(c.add(100), 396);
  UnwrappedCounter wide(64);
  wide.add(uint64_t{1} << 40);
  EXPECT_EQ(wide.add((uint64_t{1} << 40) + 4096), 4096);
}

// Intel's uncore IMC format and CAS events as sysfs writes them.
const PmuFormat kImc = {{"event", "config:0-7"},
                        {"umask", "config:8-15"},
                        {"edge", "config:18"},
                        {"thresh", "config:24-31"}};

TEST(PmuEvent, EncodesSysfsSpecsUnderTheirFormat) {
  EXPECT_EQ(encode_pmu_event("event=0x04,umask=0x03\n", kImc).value(), 0x0304u);
  EXPECT_EQ(encode_pmu_event("event=0xff,umask=0x0c,edge", kImc).value(), 0x40cffu);
  EXPECT_EQ(encode_pmu_event("event=0x04,thresh=2", kImc).value(), 0x02000004u);
  // A field split over two ranges: low bits go to the first range, the rest to the second.
  const PmuFormat split = {{"event", "config:0-7,32-35"}};
  EXPECT_EQ(encode_pmu_event("event=0x1ab", split).value(), 0xabu | (uint64_t{1} << 32));
}

TEST(PmuEvent, RejectsWhatItCannotEncode) {
  EXPECT_EQ(encode_pmu_event("event=0x100", kImc).error().code(),
            ErrorCode::kInvalidArgument);  // 9 bits in 8
  EXPECT_EQ(encode_pmu_event("colour=1", kImc).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_pmu_event("event=zz", kImc).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(encode_pmu_event("x=1", {{"x", "config1:0-3"}}).error().code(),
            ErrorCode::kInvalidArgument);
}

TEST(MemoryTraffic, MachinesWithoutImcCountersSaySo) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "software");
  auto none = MemoryTraffic::open(dir.str());
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), ErrorCode::kNotSupported);
  EXPECT_NE(none.error().message().find("uncore_imc"), std::string::npos);
  // An IMC the kernel refuses to count (a PMU type that does not exist): the reason, not a crash.
  const auto imc = dir.path() / "uncore_imc_0";
  std::filesystem::create_directories(imc / "format");
  std::filesystem::create_directories(imc / "events");
  std::ofstream(imc / "type") << "999999\n";
  std::ofstream(imc / "format" / "event") << "config:0-7\n";
  std::ofstream(imc / "format" / "umask") << "config:8-15\n";
  std::ofstream(imc / "events" / "cas_count_read") << "event=0x04,umask=0x03\n";
  std::ofstream(imc / "events" / "cas_count_read.scale") << "6.103515625e-5\n";
  std::ofstream(imc / "events" / "cas_count_read.unit") << "MiB\n";
  auto refused = MemoryTraffic::open(dir.str());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kNotSupported);
  EXPECT_NE(refused.error().message().find("perf_event_open"), std::string::npos)
      << refused.error().to_string();
}

TEST(PcieRxSampler, NoGpuToSampleIsAnErrorNotACrash) {
  auto s = PcieRxSampler::start({}, std::chrono::milliseconds(5));
  ASSERT_FALSE(s);  // without NVML: kNotSupported; with it: nothing to sample
  EXPECT_TRUE(s.error().code() == ErrorCode::kNotSupported ||
              s.error().code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvtier::metrics
