// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "host_load.hpp"

#include <cstring>

namespace kvtier::seed {

HostLoad::HostLoad(unsigned threads, uint64_t buffer_bytes) {
  for (unsigned t = 0; t < threads; ++t) {
    threads_.emplace_back([this, buffer_bytes] {
      // Far larger than any cache, so every copy goes to DRAM; copied in 4 MiB steps so the count
      // follows the load closely.
      std::unique_ptr<std::byte[]> src(new std::byte[buffer_bytes]),
          dst(new std::byte[buffer_bytes]);
      std::memset(src.get(), 1, buffer_bytes);
      std::memset(dst.get(), 2, buffer_bytes);
      constexpr uint64_t kStep = uint64_t{4} << 20;
      while (!stop_.load(std::memory_order_relaxed)) {
        for (uint64_t at = 0; at + kStep <= buffer_bytes && !stop_.load(std::memory_order_relaxed);
             at += kStep) {
          std::memcpy(dst.get() + at, src.get() + at, kStep);
          bytes_.fetch_add(2 * kStep, std::memory_order_relaxed);
        }
      }
    });
  }
}

double HostLoad::rate_over(std::chrono::milliseconds window) const {
  const uint64_t b0 = bytes();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
  return static_cast<double>(bytes() - b0) / took.count();
}

HostLoad::~HostLoad() {
  stop_ = true;
  for (auto& t : threads_) t.join();
}

}  // namespace kvtier::seed
