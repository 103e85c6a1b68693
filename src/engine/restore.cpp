// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::restore: the tiers in order (tiers/tier_list.cpp: the DRAM tier, the local drives, the
// cluster), each serving what it holds of the chunks still missing through the one read route;
// the result counts the intact prefix only.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {

Result<RestoreResult> Engine::Impl::restore(std::span<const Token> tokens,
                                            const KvMemory& destination) {
  KVTIER_EXPECTS(!tokens.empty(), "restore: the token list is empty");
  const LatencyTimer timer(counters_.restore_latency);
  counters_.restores++;
  std::vector<Key128> keys = chain_keys(namespace_, tokens, options_.geometry.chunk_tokens);
  std::vector<LocatedRecord> found = find_prefix(tokens, keys);
  uint64_t prefix = 0;
  for (const LocatedRecord& r : found) prefix += r.meta.token_count;
  KVTIER_EXPECTS(destination.params.capacity_tokens >= prefix,
                 fmt::format("restore destination: room for {} tokens, {} stored",
                             destination.params.capacity_tokens, prefix));
  RestoreResult result;
  RestoreJob job(tokens, std::move(keys), std::move(found), destination, result);
  KVTIER_TRY(run_restore(job, prefix));
  return result;
}

Result<RestoreResult> Engine::Impl::restore_chunks(std::span<const ChunkRef> chunks,
                                                   const KvMemory& destination) {
  const LatencyTimer timer(counters_.restore_latency);
  counters_.restores++;
  std::vector<Key128> keys;
  std::vector<uint64_t> firsts;
  std::vector<uint32_t> counts;
  for (const ChunkRef& c : chunks) {
    keys.push_back(c.key);
    firsts.push_back(c.first);
    counts.push_back(c.tokens);
  }
  std::vector<LocatedRecord> found = held_records(chunks);
  const uint64_t prefix =
      found.empty() ? 0 : chunks[found.size() - 1].first + chunks[found.size() - 1].tokens;
  KVTIER_EXPECTS(destination.params.capacity_tokens >= prefix,
                 fmt::format("restore destination: room for {} tokens, {} stored",
                             destination.params.capacity_tokens, prefix));
  RestoreResult result;
  RestoreJob job({}, std::move(keys), std::move(found), destination, result);
  job.firsts = std::move(firsts);
  job.counts = std::move(counts);
  KVTIER_TRY(run_restore(job, prefix));
  return result;
}

std::vector<LocatedRecord> Engine::Impl::held_records(std::span<const ChunkRef> chunks) {
  std::vector<LocatedRecord> found;
  for (const ChunkRef& c : chunks) {
    std::optional<LocatedRecord> r = store_->find(c.key);
    if (!r || r->meta.token_count != c.tokens) break;
    found.push_back(*r);
  }
  return found;
}

size_t Engine::Impl::held_chunks(std::span<const ChunkRef> chunks) {
  return held_records(chunks).size();
}

Result<uint64_t> Engine::Impl::evict_chunks(std::span<const ChunkRef> chunks) {
  std::vector<Key128> keys;
  for (const ChunkRef& c : chunks) {
    if (store_->find(c.key)) keys.push_back(c.key);
  }
  return drop_keys(keys);
}

Status Engine::Impl::run_restore(RestoreJob& job, uint64_t prefix) {
  RestoreResult& result = job.result;
  // Each tier in turn serves what it holds of the chunks still missing.
  for (const auto& tier : tiers_) KVTIER_TRY(tier->restore(job, *read_route_));
  const size_t served = job.served();
  for (size_t c = 0; c < served; ++c) result.tokens_restored += job.tokens_served[c];
  for (const auto& tier : tiers_) {
    uint64_t chunks = 0;
    for (size_t c = 0; c < served; ++c) chunks += job.served_by[c] == tier.get() ? 1 : 0;
    tier->served_prefix(chunks, job.tally);
  }
  counters_.dram_hits += job.tally.dram_hits;
  counters_.store_hits += job.tally.store_hits;
  counters_.staging_bytes_read += job.tally.staging_bytes_read;
  counters_.gds_restores += job.tally.gds_restores;
  counters_.restore_misses += job.keys.size() - served;
  counters_.tokens_restored += result.tokens_restored;
  if (!result.problem.empty()) {
    KVTIER_LOG(log_, kWarn, "restore stopped at {} of {} tokens: {}", result.tokens_restored,
               prefix, result.problem);
  }
  if (!job.corrupt.empty()) {
    result.checksum_misses = job.corrupt.size();
    counters_.checksum_misses += job.corrupt.size();
    KVTIER_LOG(log_, kWarn, "restore: {} record(s) failed their checks and were dropped",
               job.corrupt.size());
    if (result.problem.empty())
      result.problem = fmt::format("{} corrupt record(s) dropped", job.corrupt.size());
  }
  counters_.bytes_restored += options_.geometry.bytes_for_tokens(result.tokens_restored);
  counters_.restore_host_bytes += result.host_bytes;
  return {};
}

Tier* Engine::Impl::tier_in_front_of(const Tier* tier) {
  for (size_t i = 1; i < tiers_.size(); ++i) {
    if (tiers_[i].get() == tier) return tiers_[i - 1].get();
  }
  return nullptr;
}

uint64_t Engine::Impl::recheck_corrupt(std::span<const LocatedRecord> records,
                                       std::span<const uint64_t> first_tokens,
                                       const KvMemory* destination, std::span<RecordState> states) {
  std::vector<LocatedRecord> suspects;
  std::vector<uint64_t> suspect_first;
  std::vector<size_t> index;
  for (size_t i = 0; i < records.size(); ++i) {
    if (states[i] != RecordState::kCorrupt) continue;
    suspects.push_back(records[i]);
    suspect_first.push_back(first_tokens.empty() ? 0 : first_tokens[i]);
    index.push_back(i);
  }
  if (suspects.empty()) return 0;
  const std::vector<RecheckOutcome> found = recheck(suspects, suspect_first, destination);
  uint64_t kept = 0, dropped = 0;
  for (size_t j = 0; j < suspects.size(); ++j) {
    RecordState& st = states[index[j]];
    switch (found[j]) {
      case RecheckOutcome::kCorrupt:
        ++dropped;
        break;
      case RecheckOutcome::kIntact:
        st = RecordState::kIntact;
        ++kept;
        break;
      case RecheckOutcome::kIntactNotPlaced:
        st = RecordState::kIncomplete;
        ++kept;
        break;
      case RecheckOutcome::kUnread:
        st = RecordState::kIncomplete;
        break;
    }
  }
  counters_.recheck_kept += kept;
  counters_.recheck_dropped += dropped;
  if (kept > 0) {
    KVTIER_LOG(log_, kWarn,
               "{} record(s) failed a check on the {} path but verified when re-read through the "
               "page cache: kept "
               "(a fault of that data path, not of the records)",
               kept, destination == nullptr ? "verify" : kit_->io_name());
  }
  return kept;
}

}  // namespace kvtier
