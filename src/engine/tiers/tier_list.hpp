// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The registration of the tiers: each implementation's maker, and the order a restore asks them.
#pragma once

#include <memory>
#include <vector>

#include "engine/engine_impl.hpp"
#include "engine/tiers/tier.hpp"

namespace kvtier {

/// The DRAM tier's slabs (engine.dram_): records saved or restored lately, in host memory.
std::unique_ptr<Tier> make_dram_tier(Engine::Impl& engine);
/// The local drives (engine.store_): the index every local lookup answers from.
std::unique_ptr<Tier> make_drive_tier(Engine::Impl& engine);
/// The Redis Cluster (engine.remote_): records of every node, past what this node holds.
std::unique_ptr<Tier> make_cluster_tier(Engine::Impl& engine);

/// The engine's tiers, fastest first: those its options enable.
std::vector<std::unique_ptr<Tier>> make_tiers(Engine::Impl& engine);

}  // namespace kvtier
