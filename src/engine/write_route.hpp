// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The records of one write through the write route (write_route.cpp): a save's, or records moved
// into the drives from another tier.
#pragma once

#include <optional>
#include <vector>

#include "engine/engine_impl.hpp"

namespace kvtier {

struct Engine::Impl::SaveBatch {
  std::vector<RecordMeta> records;  // placed by place_batch()
  std::vector<uint64_t> first_tokens;
  std::vector<Placement> placements;
  std::vector<LocatedRecord> located;  // records with their files
  IoPlan plan;
  std::vector<std::optional<DramTier::Reservation>> tier;  // write-through slabs, per record
};

}  // namespace kvtier
