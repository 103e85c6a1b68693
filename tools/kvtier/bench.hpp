// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>
#include <string>

#include "cli_common.hpp"

namespace kvtier::cli {

struct BenchFlags {
  uint64_t sessions = 4;
  uint64_t tokens = 20000;
  uint64_t seed = 1;
  uint64_t repeat = 3;  // restore/ceiling pairs per session and path
  std::string paths = "direct,buffered";
  std::string json;
  bool keep = false;
  std::string fio = "fio";  // the independent ceiling's tool; "off": not measured
  unsigned fio_depth = 0;   // requests in flight per fio job; 0: the fastest of kFioDepths
  std::vector<uint64_t> fio_requests;  // seed: request sizes fio tries besides kvtier's
};

/// The depths tried on the first session when --fio-depth is 0.
inline constexpr unsigned kFioDepths[] = {1, 2, 4, 8, 16, 32};

int run_bench(StoreFlags flags, const BenchFlags& bench);

}  // namespace kvtier::cli
