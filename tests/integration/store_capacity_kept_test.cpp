// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A store keeps its capacity in MANIFEST.json: reopened without one it keeps it, an engine that
// asks for another says so and takes it at its first save (an engine that only reads never
// evicts for it), and a manifest written before capacities were kept still opens.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

namespace fs = std::filesystem;
using testing::HostKv;

constexpr uint64_t kMiB = uint64_t{1} << 20;
// 63 chunks of 256 tokens fill one 16 MiB segment exactly: each such session is one segment.
constexpr uint64_t kSegmentSession = 63 * 256;
// Room for four segment-sized sessions and the index files; and for two.
constexpr uint64_t kFour = 65 * kMiB;
constexpr uint64_t kTwo = 33 * kMiB;

class StoreCapacityKeptTest : public ::testing::Test {
 protected:
  Options options(uint64_t capacity) {
    Options o = testing::small_options(dir_.str(), g_);
    o.capacity_bytes = capacity;
    o.log_level = LogLevel::kWarn;
    o.log_sink = [this](LogLevel, std::string_view line) {
      std::lock_guard lock(mu_);
      log_.emplace_back(line);
    };
    return o;
  }
  std::unique_ptr<Engine> open(uint64_t capacity) {
    auto e = Engine::open(options(capacity));
    EXPECT_TRUE(testing::is_ok(e));
    return e ? std::move(*e) : nullptr;
  }
  Status save(Engine& e, std::span<const Token> tokens) {
    return testing::save_synthetic(e, g_, tokens);
  }
  /// Restores and checks every restored byte; returns how many tokens came back.
  uint64_t restored(Engine& e, std::span<const Token> tokens) {
    return testing::restored_exact(e, g_, tokens);
  }
  fs::path manifest() const { return dir_.path() / "rank0of1" / "MANIFEST.json"; }
  nlohmann::json read_manifest() const { return nlohmann::json::parse(std::ifstream(manifest())); }
  bool logged(std::string_view text) {
    std::lock_guard lock(mu_);
    for (const std::string& line : log_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<std::vector<Token>> sessions(uint64_t first_seed, int n) {
    std::vector<std::vector<Token>> s;
    for (int i = 0; i < n; ++i) s.push_back(synthetic::tokens(first_seed + i, kSegmentSession));
    return s;
  }

  testing::TempDir dir_;
  KvGeometry g_ = testing::tiny_geometry();
  std::mutex mu_;
  std::vector<std::string> log_;
};

TEST_F(StoreCapacityKeptTest, ReopenedWithoutACapacityKeepsItsOwn) {
  const auto s = sessions(900, 5);
  {
    auto e = open(kFour);
    for (int i = 0; i < 4; ++i) ASSERT_OK(save(*e, s[i]));
  }
  EXPECT_EQ(read_manifest().at("capacity_bytes").get<uint64_t>(), kFour);
  auto e = open(0);  // would be 64 GiB if the store forgot
  EXPECT_EQ(e->stats().capacity_bytes, kFour);
  ASSERT_OK(save(*e, s[4]));
  EXPECT_EQ(e->stats().evicted_segments, 1u) << "the kept capacity must bound the fifth session";
  EXPECT_EQ(*e->lookup(s[0]), 0u);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(restored(*e, s[i]), s[i].size());
  EXPECT_FALSE(logged("capacity")) << "nothing to say when no capacity was asked for";
}

TEST_F(StoreCapacityKeptTest, TheEnvironmentCountsAsAskingAndUnsetKeepsTheStores) {
  {
    auto e = open(kFour);
    ASSERT_OK(save(*e, synthetic::tokens(910, 1000)));
  }
  ASSERT_EQ(::setenv("KVTIER_CAPACITY_BYTES", "33M", 1), 0);
  {
    auto e = open(0);
    EXPECT_TRUE(logged("KVTIER_CAPACITY_BYTES"));
    ASSERT_OK(save(*e, synthetic::tokens(911, 1000)));
    EXPECT_EQ(e->stats().capacity_bytes, kTwo);
  }
  ASSERT_EQ(::unsetenv("KVTIER_CAPACITY_BYTES"), 0);
  EXPECT_EQ(open(0)->stats().capacity_bytes, kTwo);
}

// A smaller capacity asked for by an engine that only reads: nothing evicted, nothing written; its
// first save takes it, says so, keeps it, and evicts down to it.
TEST_F(StoreCapacityKeptTest, AnotherCapacityIsSaidAndTakenAtTheFirstSaveOnly) {
  const auto s = sessions(920, 5);
  {
    auto e = open(kFour);
    for (int i = 0; i < 4; ++i) ASSERT_OK(save(*e, s[i]));
  }
  const std::string before = read_manifest().dump();
  {
    auto reader = open(kTwo);
    EXPECT_TRUE(logged("becomes")) << "an explicit other capacity must be said at open";
    for (int i = 0; i < 4; ++i) EXPECT_EQ(restored(*reader, s[i]), s[i].size());
    auto verified = reader->verify();
    ASSERT_OK(verified);
    EXPECT_EQ(verified->records_checked, 4 * 63u);
    EXPECT_EQ(reader->stats().evicted_segments, 0u);
    EXPECT_EQ(reader->stats().capacity_bytes, kFour);
  }
  EXPECT_EQ(read_manifest().dump(), before);
  {
    auto writer = open(kTwo);
    ASSERT_OK(save(*writer, s[4]));
    EXPECT_TRUE(logged(fmt::format("capacity changed from {} to {} bytes", kFour, kTwo)));
    const Stats st = writer->stats();
    EXPECT_EQ(st.capacity_bytes, kTwo);
    EXPECT_EQ(st.evicted_segments, 3u);
    EXPECT_EQ(restored(*writer, s[4]), s[4].size());
  }
  EXPECT_EQ(read_manifest().at("capacity_bytes").get<uint64_t>(), kTwo);
  auto e = open(0);
  EXPECT_EQ(e->stats().capacity_bytes, kTwo);
  EXPECT_EQ(e->stats().segments, 2u);
}

TEST_F(StoreCapacityKeptTest, ACapacityTooSmallForTheStoreIsRefusedAtOpen) {
  {
    auto e = open(kFour);
    ASSERT_OK(save(*e, synthetic::tokens(930, 1000)));
  }
  auto e = Engine::open(options(8 * kMiB));
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kInvalidArgument) << e.error().to_string();
  EXPECT_EQ(read_manifest().at("capacity_bytes").get<uint64_t>(), kFour);
}

// A store made before capacities were kept: its manifest has none. It opens with the capacity
// asked for (the default when none is), and learns it at the first save.
TEST_F(StoreCapacityKeptTest, AManifestWithoutACapacityOpensAndLearnsOneAtTheFirstSave) {
  const auto a = synthetic::tokens(940, 3000);
  {
    auto e = open(kFour);
    ASSERT_OK(save(*e, a));
  }
  nlohmann::json old = read_manifest();
  old.erase("capacity_bytes");
  std::ofstream(manifest()) << old.dump(2) << "\n";
  {
    auto e = open(kTwo);
    EXPECT_EQ(e->stats().capacity_bytes, kTwo);
    EXPECT_EQ(restored(*e, a), a.size());
  }
  EXPECT_FALSE(read_manifest().contains("capacity_bytes")) << "an engine that only read wrote it";
  {
    auto e = open(kTwo);
    ASSERT_OK(save(*e, synthetic::tokens(941, 1000)));
  }
  EXPECT_EQ(read_manifest().at("capacity_bytes").get<uint64_t>(), kTwo);
  auto e = open(0);
  EXPECT_EQ(e->stats().capacity_bytes, kTwo);
  EXPECT_EQ(restored(*e, a), a.size());
}

}  // namespace
}  // namespace kvtier
