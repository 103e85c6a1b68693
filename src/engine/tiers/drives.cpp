// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The local drives as a tier: the store's records of the local prefix read through the kit's file
// channel (cuFile where it is in use, else POSIX), records that failed a check re-read before they
// are dropped; records moved here (promoted from the cluster) written through the write route.
#include "engine/tiers/tier_list.hpp"

namespace kvtier {
namespace {

class DriveTier final : public Tier {
 public:
  explicit DriveTier(Engine::Impl& engine) : engine_(engine) {}

  std::string_view name() const override { return "local drives"; }

  Status restore(RestoreJob& job, ReadRoute& route) override {
    std::vector<LocatedRecord> misses;
    std::vector<size_t> chunk;
    std::vector<uint64_t> first;
    for (size_t c = 0; c < job.found.size(); ++c) {
      if (job.state[c] == RecordState::kIntact) continue;
      misses.push_back(job.found[c]);
      chunk.push_back(c);
      first.push_back(job.first_token(c, engine_.options_.geometry.chunk_tokens));
    }
    if (misses.empty()) return {};
    ReadOutcome out = read(route, misses, job, first);
    job.result.bytes_read = out.bytes;
    job.result.extents = out.extents;
    job.result.host_bytes += out.host_bytes;
    std::vector<RecordState> states(misses.size());
    for (size_t i = 0; i < misses.size(); ++i) states[i] = out.state(i, misses[i].meta);
    job.result.recheck_kept =
        engine_.recheck_corrupt(misses, first, &job.destination, std::span(states));
    std::vector<Key128> corrupt;
    for (size_t i = 0; i < misses.size(); ++i) {
      job.serve(chunk[i], states[i], misses[i].meta.token_count, this);
      if (states[i] == RecordState::kCorrupt) corrupt.push_back(misses[i].meta.key);
    }
    if (!out.status.ok()) job.result.problem = out.status.to_string();
    if (corrupt.empty()) return {};
    // Dropped before the tiers behind are asked, so that a copy they serve can take its place.
    job.corrupt.insert(job.corrupt.end(), corrupt.begin(), corrupt.end());
    return engine_.store_->drop_corrupt(corrupt);
  }

  void served_prefix(uint64_t chunks, RestoreTally& tally) override { tally.store_hits += chunks; }

  Result<uint64_t> accept(std::span<const RecordMeta> records,
                          std::span<const std::span<const std::byte>> images) override {
    return engine_.write_images(records, images);
  }

 private:
  /// Through the file channel for the destination; when cuFile refuses the store's files before
  /// reading anything, that is said once and POSIX serves from then on.
  ReadOutcome read(ReadRoute& route, std::span<const LocatedRecord> records, RestoreJob& job,
                   std::span<const uint64_t> first) {
    TransferKit& kit = route.kit();
    Channel* channel = &kit.file_channel_for(&job.destination);
    auto read = route.read(*channel, records, &job.destination, first);
    if (!read && channel != &kit.posix_channel()) {
      kit.refuse_gds(read.error());
      channel = &kit.posix_channel();
      read = route.read(*channel, records, &job.destination, first);
    }
    if (!read) {
      // Nothing read: every record incomplete (a miss, no evidence against it).
      ReadOutcome out;
      out.size_for(records.size());
      out.status = read.error();
      return out;
    }
    if (channel->residency() == Residency::kDevice) {
      ++job.tally.gds_restores;
    } else {
      job.tally.staging_bytes_read += read->bytes;
    }
    return std::move(*read);
  }

  Engine::Impl& engine_;
};

}  // namespace

std::unique_ptr<Tier> make_drive_tier(Engine::Impl& engine) {
  return std::make_unique<DriveTier>(engine);
}

}  // namespace kvtier
