// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kvtier/options.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include <fmt/format.h>

#include "api/env.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

TEST(ParseSize, AcceptsUnitsAndRejectsNonsense) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("64M"), 64u << 20);
  EXPECT_EQ(*parse_size("1.5G"), 3u << 29);
  EXPECT_EQ(*parse_size("2GiB"), uint64_t{2} << 30);
  EXPECT_FALSE(parse_size("").has_value());
  EXPECT_FALSE(parse_size("-1").has_value());
  EXPECT_FALSE(parse_size("12Q").has_value());
  EXPECT_FALSE(parse_size("lots").has_value());
  EXPECT_FALSE(parse_size("99999999999T").has_value());  // overflows 64 bits
}

TEST(ParseSize, OneGrammarDecimalWithABinaryUnit) {
  EXPECT_EQ(*parse_size("0"), 0u);
  EXPECT_EQ(*parse_size("010"), 10u);  // decimal, not octal
  EXPECT_EQ(*parse_size("1k"), 1024u);
  EXPECT_EQ(*parse_size("8KiB"), 8192u);
  EXPECT_EQ(*parse_size("512B"), 512u);
  EXPECT_EQ(*parse_size("0.5M"), 512u << 10);
  EXPECT_EQ(*parse_size("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(*parse_size("16777215T"), uint64_t{16777215} << 40);
  // strtod read these as 16 MiB, 1,000 bytes, 1 MiB and infinity; they are not sizes.
  for (const char* bad :
       {"0x1000000", "1e3", "1E3", "1e3K", "+5", " 5", "5 ", "inf", "nan", ".5K", "5.K", "1.5",
        "0.3K", "18446744073709551616", "16777216T", "1.5.0G", "5KB", "5 K", "K"}) {
    auto v = parse_size(bad);
    EXPECT_FALSE(v.has_value()) << bad << " read as " << *v;
    if (!v) {
      EXPECT_EQ(v.error().code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(v.error().message().find(bad), std::string::npos) << v.error().message();
    }
  }
  // The message says the grammar, not just that something is wrong.
  EXPECT_NE(parse_size("0x10").error().message().find("is hexadecimal: a size is a decimal"),
            std::string::npos);
}

class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvGuard() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(Options, EnvironmentFillsUnsetFieldsButExplicitOptionsWin) {
  EnvGuard cap("KVTIER_CAPACITY_BYTES", "2G");
  EnvGuard req("KVTIER_IO_REQUEST_BYTES", "1M");
  Options o;
  o.root = "/tmp/x";
  o.geometry = testing::tiny_geometry();
  o.io_request_bytes = 4u << 20;
  auto r = o.resolved();
  ASSERT_OK(r);
  EXPECT_EQ(r->capacity_bytes, uint64_t{2} << 30);
  EXPECT_EQ(r->io_request_bytes, 4u << 20);
}

TEST(Options, MalformedEnvironmentIsAnError) {
  EnvGuard level("KVTIER_LOG_LEVEL", "loud");
  Options o;
  o.root = "/tmp/x";
  o.geometry = testing::tiny_geometry();
  EXPECT_EQ(o.resolved().error().code(), ErrorCode::kInvalidArgument);
}

TEST(Options, ConsumerThreadsFromTheEnvironmentAreAWholeNumberFromOneTo256) {
  for (const char* bad : {"0", "257", "-1", "4k", "two", ""}) {
    SCOPED_TRACE(bad);
    EnvGuard set("KVTIER_CONSUMER_THREADS", bad);
    const auto env = read_env_overrides();
    ASSERT_FALSE(env.has_value());
    EXPECT_EQ(env.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(env.error().message().find("KVTIER_CONSUMER_THREADS"), std::string::npos);
  }
  EnvGuard set("KVTIER_CONSUMER_THREADS", "16");
  const auto env = read_env_overrides();
  ASSERT_OK(env);
  EXPECT_EQ(env->consumer_threads, 16u);
}

TEST(Options, ACodedRunOfNoBytesIsRefusedAndASizeIsTaken) {
  Options o;
  o.root = "/tmp/x";
  o.geometry = testing::tiny_geometry();
  {
    EnvGuard run("KVTIER_CODED_RUN_BYTES", "0");
    const auto r = o.resolved();
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("KVTIER_CODED_RUN_BYTES"), std::string::npos);
  }
  EnvGuard run("KVTIER_CODED_RUN_BYTES", "1G");
  const auto env = read_env_overrides();
  ASSERT_OK(env);
  EXPECT_EQ(env->coded_run_bytes, uint64_t{1} << 30);
}

TEST(Options, RejectsUnalignedAndInconsistentSizes) {
  Options o;
  o.root = "/tmp/x";
  o.geometry = testing::tiny_geometry();
  auto code = [&](auto mutate) {
    Options b = o;
    mutate(b);
    auto r = b.resolved();
    return r ? ErrorCode::kOk : r.error().code();
  };
  EXPECT_EQ(code([](Options&) {}), ErrorCode::kOk);
  EXPECT_EQ(code([](Options& b) { b.root.clear(); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([](Options& b) { b.io_request_bytes = 1000; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([](Options& b) {
              b.staging_bytes = 4096;
              b.io_request_bytes = 8192;
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([](Options& b) {
              b.capacity_bytes = 1 << 20;
              b.segment_bytes = 2 << 20;
            }),
            ErrorCode::kInvalidArgument);
  // A chunk bigger than a segment cannot be stored.
  EXPECT_EQ(code([](Options& b) {
              b.geometry = *geometry_for("llama-3-70b");
              b.segment_bytes = 16 << 20;
            }),
            ErrorCode::kInvalidArgument);
}

TEST(Options, ANewStoreOverSeveralDrivesGetsSegmentsThatSpreadASessionOverEveryDrive) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  // The H200 runs' store: Qwen3-Coder-30B-A3B at TP 2 over eight drives (4.9 GB a rank), where
  // 256 MiB segments were found to spread a session and 1 GiB ones left three drives idle.
  Options eight;
  eight.root = "/d0";
  for (int i = 1; i < 8; ++i) eight.extra_roots.push_back(fmt::format("/d{}", i));
  eight.geometry = *geometry_for("qwen3-coder-30b-a3b", 0, 2);
  ASSERT_EQ(eight.resolved()->segment_bytes, 256 * kMiB);
  Options one = eight;
  one.extra_roots.clear();
  EXPECT_EQ(one.resolved()->segment_bytes, 1024 * kMiB);  // one drive: as before
  eight.segment_bytes = 1024 * kMiB;                      // given: kept
  EXPECT_EQ(eight.resolved()->segment_bytes, 1024 * kMiB);

  std::mt19937_64 rng(testing::test_seed());
  const char* presets[] = {"qwen3-coder-30b-a3b", "llama-3-8b", "llama-3-70b", "qwen3-8b",
                           "deepseek-v3",         "tiny"};
  int spread = 0;  // multi-drive cases checked
  for (int trial = 0; trial < 500; ++trial) {
    Options o;
    o.root = "/d0";
    const uint32_t world = 1u << (rng() % 4);
    auto g = geometry_for(presets[rng() % std::size(presets)], 0, world, 64u << (rng() % 4));
    if (!g) continue;  // a preset this world does not divide
    o.geometry = *g;
    const size_t drives = 1 + rng() % 12;
    for (size_t i = 1; i < drives; ++i) o.extra_roots.push_back(fmt::format("/d{}", i));
    o.capacity_bytes = (uint64_t{1} << (28 + rng() % 10));
    auto r = o.resolved();
    if (!r) continue;  // a capacity too small for this geometry's chunk: refused as before
    SCOPED_TRACE(::testing::Message()
                 << o.geometry.describe() << ", " << drives << " drives, capacity "
                 << o.capacity_bytes << ": segment " << r->segment_bytes);
    const uint64_t seg = r->segment_bytes;
    const uint64_t record = g->bytes_for_tokens(g->chunk_tokens) + 8192;
    const uint64_t one_drive =
        std::max<uint64_t>(std::min<uint64_t>(1024 * kMiB, o.capacity_bytes / 4), 16 * kMiB);
    EXPECT_EQ(seg % 4096, 0u);
    EXPECT_GE(seg, record);
    EXPECT_LE(seg, one_drive);
    if (drives == 1) {
      EXPECT_EQ(seg, one_drive);
      continue;
    }
    ++spread;
    const uint64_t session = g->bytes_for_tokens(100000);
    const uint64_t segments = (session + seg - 1) / seg;
    // Two segments of a 100K-token session per drive, unless the floor (64 MiB, two records) or
    // the one-drive size stopped the halving; and never halved past that need.
    if (seg / 2 >= std::max(64 * kMiB, 2 * record)) {
      EXPECT_GE(segments, 2 * drives);
    }
    if (seg < one_drive) {
      EXPECT_LT((session + 2 * seg - 1) / (2 * seg), 2 * drives);
    }
  }
  EXPECT_GT(spread, 150);  // the draw reached many multi-drive stores
}

}  // namespace
}  // namespace kvtier
