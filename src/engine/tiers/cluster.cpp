// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The Redis Cluster as a tier: past what this node served, the chunks the cluster holds, fetched
// within the read route's bound on bytes in flight and read through it like any other record
// images (engine/tiers/cluster_restore.cpp); a save's records written behind
// (engine/tiers/cluster_save.cpp); lookups answered with sizes only
// (engine/tiers/cluster_lookup.cpp).
#include "engine/tiers/tier_list.hpp"

namespace kvtier {
namespace {

class ClusterTier final : public Tier {
 public:
  explicit ClusterTier(Engine::Impl& engine) : engine_(engine) {}

  std::string_view name() const override { return "cluster"; }

  Status restore(RestoreJob& job, ReadRoute& /*route*/) override {
    engine_.restore_from_remote(job, this);
    return {};
  }

  uint64_t held_run(std::span<const Token> tokens, std::span<const Key128> keys,
                    size_t first) override {
    return engine_.remote_run(tokens, keys, first);
  }

  void saved(std::span<const RecordMeta> records) override { engine_.write_behind(records); }

 private:
  Engine::Impl& engine_;
};

}  // namespace

std::unique_ptr<Tier> make_cluster_tier(Engine::Impl& engine) {
  return std::make_unique<ClusterTier>(engine);
}

}  // namespace kvtier
