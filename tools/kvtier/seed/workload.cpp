// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "workload.hpp"

#include <random>

#include <fmt/format.h>

namespace kvtier::seed {

Result<std::vector<SessionSpec>> make_sessions(const WorkloadSpec& spec) {
  if (spec.sessions == 0)
    return fail(ErrorCode::kInvalidArgument, "workload: --sessions must be > 0");
  if (spec.tokens_min == 0 || spec.tokens_min > spec.tokens_max) {
    return fail(ErrorCode::kInvalidArgument, fmt::format("workload: token range [{}, {}] is empty",
                                                         spec.tokens_min, spec.tokens_max));
  }
  if (spec.sessions > 100000)
    return fail(ErrorCode::kInvalidArgument, "workload: --sessions over 100000");
  std::mt19937_64 rng(spec.seed);
  std::uniform_int_distribution<uint64_t> count(spec.tokens_min, spec.tokens_max);
  std::vector<SessionSpec> out;
  for (uint64_t i = 0; i < spec.sessions; ++i) {
    uint64_t n = count(rng);
    if (spec.sessions >= 2 && i == 0) n = spec.tokens_max;
    if (spec.sessions >= 2 && i == 1) n = spec.tokens_min;
    // Distinct seeds far apart: sessions share no prefix, so every repeat reads its whole KV.
    out.push_back({spec.seed * 1000003 + i, n});
  }
  return out;
}

}  // namespace kvtier::seed
