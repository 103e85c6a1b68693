// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>

#include "kvtier/kvtier.hpp"
#include "synthetic.hpp"

namespace kvtier::testing {

inline ::testing::AssertionResult is_ok(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.to_string();
}
template <typename T>
::testing::AssertionResult is_ok(const Result<T>& r) {
  if (r.has_value()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.error().to_string();
}

#define ASSERT_OK(expr) ASSERT_TRUE(::kvtier::testing::is_ok(expr))
#define EXPECT_OK(expr) EXPECT_TRUE(::kvtier::testing::is_ok(expr))

/// A fresh directory under KVTIER_TEST_DIR (default: the system temp dir), removed afterwards.
/// O_DIRECT tests need it on a real filesystem, not tmpfs.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("KVTIER_TEST_DIR");
    std::filesystem::path root = base ? base : std::filesystem::temp_directory_path();
    path_ =
        root / ("kvtier-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  explicit TempDir(const std::filesystem::path& root) {
    path_ =
        root / ("kvtier-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string str() const { return path_.string(); }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

/// The seed of this run's random choices: KVTIER_TEST_SEED or the clock. Printed so a failing run
/// can be repeated.
inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("KVTIER_TEST_SEED");
    uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("KVTIER_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    std::fflush(stdout);  // a test killed later would lose it in the buffer
    return s;
  }();
  return seed;
}

/// A small geometry: 1 KiB per token, so 100K-token sessions fit in 100 MB.
inline KvGeometry tiny_geometry(uint32_t chunk_tokens = 256, uint32_t rank = 0,
                                uint32_t world = 1) {
  return *geometry_for("tiny", rank, world, chunk_tokens);
}

using synthetic::HostKv;

inline Options small_options(const std::string& root, const KvGeometry& g) {
  Options o;
  o.root = root;
  o.geometry = g;
  o.capacity_bytes = uint64_t{1} << 30;
  o.segment_bytes = uint64_t{16} << 20;
  o.io_request_bytes = uint64_t{1} << 20;
  o.staging_bytes = uint64_t{4} << 20;
  o.log_level = LogLevel::kOff;
  return o;
}

/// Saves synthetic KV (synthetic::fill_kv) for `tokens`.
inline Status save_synthetic(Engine& e, const KvGeometry& g, std::span<const Token> tokens) {
  HostKv kv(g, tokens.size());
  synthetic::fill_kv(g, tokens, kv.span(), tokens.size());
  auto r = e.save(tokens, kv.view);
  return r ? Status{} : r.error();
}

/// Restores into host memory and checks every restored byte; returns how many tokens came back.
inline uint64_t restored_exact(Engine& e, const KvGeometry& g, std::span<const Token> tokens,
                               RestoreResult* out = nullptr) {
  HostKv kv(g, tokens.size());
  auto r = e.restore(tokens, kv.view);
  EXPECT_TRUE(is_ok(r));
  if (!r) return 0;
  EXPECT_EQ(
      synthetic::first_mismatch(g, tokens.first(r->tokens_restored), kv.span(), tokens.size()),
      r->tokens_restored);
  if (out != nullptr) *out = *r;
  return r->tokens_restored;
}

}  // namespace kvtier::testing
