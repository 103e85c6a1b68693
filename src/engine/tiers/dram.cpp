// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The DRAM tier as a tier: each slab holds a record image (header block then payload), read
// through the route like a drive's pieces (header checked, one copy to the device, verified where
// it lands). A copy that fails a check is erased and left to the tiers behind.
#include "api/try.hpp"
#include "common/log.hpp"
#include "engine/tiers/tier_list.hpp"

namespace kvtier {
namespace {

class DramSlabsTier final : public Tier {
 public:
  explicit DramSlabsTier(Engine::Impl& engine) : engine_(engine), slabs_(*engine.dram_) {}

  std::string_view name() const override { return "DRAM tier"; }

  Status restore(RestoreJob& job, ReadRoute& route) override {
    // Each hit pins its slab until the read is done.
    std::vector<DramTier::Hit> hits;
    std::vector<LocatedRecord> held;
    std::vector<uint64_t> first_tokens;
    std::vector<size_t> chunk;
    std::vector<std::span<const std::byte>> images;
    std::vector<Key128> stale;
    const uint32_t chunk_tokens = engine_.options_.geometry.chunk_tokens;
    for (size_t c = 0; c < job.found.size(); ++c) {
      if (job.state[c] == RecordState::kIntact) continue;
      const RecordMeta& m = job.found[c].meta;
      DramTier::Hit hit = slabs_.find(m.key, m.payload_checksum);
      if (!hit) continue;
      // An image of the record as stored otherwise (coded, where the store now holds it raw, or
      // the reverse) is not this record's: a miss here, and dropped below.
      if (hit.bytes().size() != kBlock + m.payload_bytes) {
        stale.push_back(m.key);
        continue;
      }
      images.push_back(hit.bytes());
      hits.push_back(std::move(hit));
      held.push_back({m, nullptr});  // no file: the image is in host memory
      first_tokens.push_back(job.first_token(c, chunk_tokens));
      chunk.push_back(c);
    }
    if (!stale.empty()) slabs_.erase(stale);
    if (held.empty()) return {};
    KVTIER_ASSIGN_OR_RETURN(
        ReadOutcome out, route.read_images(held, std::move(images), first_tokens, job.destination));
    if (!out.status.ok()) return out.status;
    job.result.host_bytes += out.host_bytes;
    hits.clear();
    std::vector<Key128> bad;
    for (size_t i = 0; i < held.size(); ++i) {
      const bool intact = out.state(i, held[i].meta) == RecordState::kIntact;
      if (intact) {
        job.serve(chunk[i], RecordState::kIntact, held[i].meta.token_count, this);
        ++job.tally.dram_hits;
      } else {
        bad.push_back(held[i].meta.key);
      }
    }
    if (!bad.empty()) {
      KVTIER_LOG(
          engine_.log_, kWarn,
          "DRAM tier: {} record(s) failed their checks; dropped from the tier, read from the "
          "tiers behind",
          bad.size());
      slabs_.erase(bad);
    }
    return {};
  }

  void erase(std::span<const Key128> keys) override { slabs_.erase(keys); }

 private:
  Engine::Impl& engine_;
  DramTier& slabs_;
};

}  // namespace

std::unique_ptr<Tier> make_dram_tier(Engine::Impl& engine) {
  return std::make_unique<DramSlabsTier>(engine);
}

}  // namespace kvtier
