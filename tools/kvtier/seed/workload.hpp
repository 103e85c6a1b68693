// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The reference evaluation's workload, parameterized: N unique long prompts (token counts spread
// over [tokens_min, tokens_max] from a fixed seed), then the same N again.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtier/status.hpp"

namespace kvtier::seed {

struct SessionSpec {
  uint64_t seed = 0;  ///< token ids: synthetic::tokens(seed, tokens)
  uint64_t tokens = 0;
};

struct WorkloadSpec {
  uint64_t sessions = 20;
  uint64_t tokens_min = 98058;  // the reference's range
  uint64_t tokens_max = 100022;
  uint64_t seed = 1;
};

/// The unique sessions, in request order; the repeat phase requests them again in the same order.
/// Token counts are drawn uniformly from [tokens_min, tokens_max] by a generator seeded with
/// `seed`, with the two ends always present (for two or more sessions) so the range is the one
/// asked for.
[[nodiscard]] Result<std::vector<SessionSpec>> make_sessions(const WorkloadSpec& spec);

}  // namespace kvtier::seed
