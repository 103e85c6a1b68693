// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Seeded keys and values for the remote-tier tests, and a byte-exact checker for GETs.
#pragma once

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "redis_cluster.hpp"
#include "remote/cluster_client.hpp"
#include "remote/slot.hpp"
#include "test_util.hpp"

namespace kvtier::remote::testing {

struct Dataset {
  std::vector<std::string> keys;
  std::vector<std::string> values;

  [[nodiscard]] std::vector<std::span<const std::byte>> spans() const {
    std::vector<std::span<const std::byte>> out;
    for (const auto& v : values) out.push_back(std::as_bytes(std::span(v.data(), v.size())));
    return out;
  }
};

/// `count` keys with values of the given sizes first, then random sizes up to max_bytes
/// (log-uniform, so small and large are both common); every byte from the seed.
inline Dataset make_dataset(uint64_t seed, size_t count, std::vector<size_t> sizes,
                            size_t max_bytes) {
  std::mt19937_64 rng(seed);
  Dataset data;
  std::uniform_real_distribution<double> log_size(0.0, std::log2(static_cast<double>(max_bytes)));
  for (size_t i = 0; i < count; ++i) {
    const size_t size = i < sizes.size() ? sizes[i] : static_cast<size_t>(std::exp2(log_size(rng)));
    std::string value(size, '\0');
    for (char& c : value) c = static_cast<char>(rng());
    data.keys.push_back("kvtier-test/" + std::to_string(seed) + "/" + std::to_string(i));
    data.values.push_back(std::move(value));
  }
  return data;
}

/// Compares every delivered value with the expected one; counts what differs or arrives twice.
class Checker {
 public:
  explicit Checker(const Dataset& data) : data_(data), seen_(data.keys.size()) {}
  ValueSink sink() {
    return [this](size_t index, std::span<const std::byte> value) {
      const std::string& want = data_.values[index];
      if (value.size() != want.size() || std::memcmp(value.data(), want.data(), want.size()) != 0) {
        wrong_.fetch_add(1);
      }
      if (seen_[index].exchange(true)) duplicates_.fetch_add(1);
    };
  }
  void reset() {
    for (auto& s : seen_) s = false;
  }
  [[nodiscard]] uint64_t wrong() const { return wrong_.load(); }
  [[nodiscard]] uint64_t duplicates() const { return duplicates_.load(); }
  [[nodiscard]] bool seen(size_t i) const { return seen_[i].load(); }

 private:
  const Dataset& data_;
  std::vector<std::atomic<bool>> seen_;
  std::atomic<uint64_t> wrong_{0};
  std::atomic<uint64_t> duplicates_{0};
};

struct Tally {
  size_t done = 0, absent = 0, failed = 0;
};
inline Tally tally(const std::vector<KeyOutcome>& outcomes) {
  Tally t;
  for (const auto& o : outcomes) {
    switch (o.state) {
      case KeyState::kDone:
        ++t.done;
        break;
      case KeyState::kAbsent:
        ++t.absent;
        break;
      case KeyState::kFailed:
        ++t.failed;
        break;
    }
  }
  return t;
}

inline ClientConfig config_for(const kvtier::testing::RedisCluster& cluster,
                               std::string password = "") {
  ClientConfig config;
  config.seeds = *parse_seeds(cluster.seeds());
  config.password = std::move(password);
  return config;
}

}  // namespace kvtier::remote::testing
