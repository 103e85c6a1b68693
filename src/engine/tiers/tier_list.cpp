// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/tiers/tier_list.hpp"

namespace kvtier {

std::vector<std::unique_ptr<Tier>> make_tiers(Engine::Impl& engine) {
  std::vector<std::unique_ptr<Tier>> tiers;
  if (engine.dram_) tiers.push_back(make_dram_tier(engine));
  tiers.push_back(make_drive_tier(engine));
  if (engine.remote_) tiers.push_back(make_cluster_tier(engine));
  return tiers;
}

}  // namespace kvtier
