// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kvtier/options.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

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

}  // namespace
}  // namespace kvtier
