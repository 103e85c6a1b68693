// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::restore: the DRAM tier first, then the store (re-reading before dropping what failed a
// check), then the remote tier; the result counts the intact prefix only.
#include <algorithm>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/read_route.hpp"

namespace kvtier {

Status Engine::Impl::restore_from_dram(std::span<const LocatedRecord> records,
                                       const KvTarget& destination, std::vector<bool>& served,
                                       uint64_t& host_bytes) {
  // The tier's slabs are a byte source like a drive: one copy each to the device, verified where
  // it lands. Each hit pins its slab until the read is done.
  std::vector<DramTier::Hit> hits;
  std::vector<LocatedRecord> held;
  std::vector<uint64_t> first_tokens;
  std::vector<size_t> index;
  std::vector<std::span<const std::byte>> payloads;
  for (size_t r = 0; r < records.size(); ++r) {
    DramTier::Hit hit = dram_->find(records[r].meta.key, records[r].meta.payload_checksum);
    if (!hit) continue;
    payloads.push_back(hit.payload());
    hits.push_back(std::move(hit));
    held.push_back(records[r]);
    first_tokens.push_back(r * uint64_t{options_.geometry.chunk_tokens});
    index.push_back(r);
  }
  if (held.empty()) return {};
  KVTIER_ASSIGN_OR_RETURN(ReadOutcome out,
                          read_payloads(held, std::move(payloads), first_tokens, destination));
  if (!out.status.ok()) return out.status;
  host_bytes += out.host_bytes;
  hits.clear();
  std::vector<Key128> bad;
  uint64_t good = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    const bool intact = out.state(i, held[i].meta) == RecordState::kIntact;
    served[index[i]] = intact;
    good += intact ? 1 : 0;
    if (!intact) bad.push_back(held[i].meta.key);
  }
  if (!bad.empty()) {
    KVTIER_LOG(
        log_, kWarn,
        "DRAM tier: {} record(s) failed their checksum; dropped from the tier, read from disk",
        bad.size());
    dram_->erase(bad);
  }
  counters_.dram_hits += good;
  return {};
}

uint64_t Engine::Impl::continue_in_cluster(std::span<const Token> tokens,
                                           std::span<const LocatedRecord> found, uint64_t served,
                                           const KvTarget& destination, RestoreResult& result) {
  const uint64_t chunk = options_.geometry.chunk_tokens;
  const uint64_t asked = (tokens.size() + chunk - 1) / chunk;
  const size_t from = remote_start(tokens, found.first(served));
  if (from >= asked) return served;
  const RemoteRestored got = restore_from_remote(tokens, from, destination, result);
  if (from == served) return served + got.chunks;
  // The local prefix ended in a partial chunk: the cluster's whole chunk took its rows, or, having
  // failed its check where it landed, left them unspecified. Either way the partial one no longer
  // counts; untouched (nothing placed), it still does.
  if (got.chunks == 0 && !got.placed) return served;
  result.tokens_restored -= found[from].meta.token_count;
  return from + got.chunks;
}

Result<RestoreResult> Engine::Impl::restore(std::span<const Token> tokens,
                                            const KvTarget& destination) {
  KVTIER_EXPECTS(!tokens.empty(), "restore: the token list is empty");
  const LatencyTimer timer(counters_.restore_latency);
  counters_.restores++;
  const uint64_t chunk = options_.geometry.chunk_tokens;
  const uint64_t asked = (tokens.size() + chunk - 1) / chunk;
  std::vector<LocatedRecord> found = find_prefix(tokens);
  uint64_t prefix = 0;
  for (const LocatedRecord& r : found) prefix += r.meta.token_count;
  KVTIER_EXPECTS(destination.params.capacity_tokens >= prefix,
                 fmt::format("restore destination: room for {} tokens, {} stored",
                             destination.params.capacity_tokens, prefix));
  RestoreResult result;
  if (found.empty() && !remote_) {
    counters_.restore_misses += asked;
    return result;
  }
  std::vector<RecordState> states(found.size(), RecordState::kIncomplete);

  // DRAM tier first: what it holds needs no disk read.
  std::vector<bool> from_dram(found.size(), false);
  if (dram_) KVTIER_TRY(restore_from_dram(found, destination, from_dram, result.host_bytes));
  for (size_t r = 0; r < found.size(); ++r) {
    if (from_dram[r]) states[r] = RecordState::kIntact;
  }
  std::vector<LocatedRecord> misses;
  std::vector<size_t> miss_index;
  std::vector<uint64_t> miss_first;
  for (size_t r = 0; r < found.size(); ++r) {
    if (from_dram[r]) continue;
    misses.push_back(found[r]);
    miss_index.push_back(r);
    miss_first.push_back(r * uint64_t{options_.geometry.chunk_tokens});
  }
  if (!misses.empty()) {
    ReadOutcome out = read_from_disk(misses, destination, miss_first);
    result.bytes_read = out.bytes;
    result.extents = out.extents;
    result.host_bytes += out.host_bytes;
    std::vector<RecordState> miss_states(misses.size());
    for (size_t i = 0; i < misses.size(); ++i) miss_states[i] = out.state(i, misses[i].meta);
    result.recheck_kept = recheck_corrupt(misses, miss_first, &destination, miss_states);
    for (size_t i = 0; i < misses.size(); ++i) states[miss_index[i]] = miss_states[i];
    if (!out.status.ok()) result.problem = out.status.to_string();
  }

  std::vector<Key128> corrupt;
  bool prefix_intact = true;
  uint64_t served = 0;
  for (size_t r = 0; r < found.size(); ++r) {
    if (states[r] == RecordState::kCorrupt) corrupt.push_back(found[r].meta.key);
    prefix_intact = prefix_intact && states[r] == RecordState::kIntact;
    if (!prefix_intact) continue;
    result.tokens_restored += found[r].meta.token_count;
    ++served;
    if (!from_dram[r]) counters_.store_hits++;
  }
  // The cluster last: the chunks past what this node served (DRAM tier and local store).
  if (remote_) served = continue_in_cluster(tokens, found, served, destination, result);
  counters_.restore_misses += asked - std::min(asked, served);
  counters_.tokens_restored += result.tokens_restored;
  if (!result.problem.empty()) {
    KVTIER_LOG(log_, kWarn, "restore stopped at {} of {} tokens: {}", result.tokens_restored,
               prefix, result.problem);
  }
  if (!corrupt.empty()) {
    result.checksum_misses = corrupt.size();
    counters_.checksum_misses += corrupt.size();
    KVTIER_LOG(log_, kWarn, "restore: {} record(s) failed their checks and were dropped",
               corrupt.size());
    if (result.problem.empty())
      result.problem = fmt::format("{} corrupt record(s) dropped", corrupt.size());
    KVTIER_TRY(store_->drop(corrupt));
  }
  counters_.bytes_restored += options_.geometry.bytes_for_tokens(result.tokens_restored);
  counters_.restore_host_bytes += result.host_bytes;
  return result;
}

uint64_t Engine::Impl::recheck_corrupt(std::span<const LocatedRecord> records,
                                       std::span<const uint64_t> first_tokens,
                                       const KvTarget* destination, std::span<RecordState> states) {
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
               kept, destination == nullptr ? "verify" : data_->io_name());
  }
  return kept;
}

}  // namespace kvtier
