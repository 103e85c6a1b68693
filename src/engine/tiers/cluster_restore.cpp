// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Restores from the remote tier: the chunks past the local prefix, fetched in pipelined batches
// within the read route's bound on bytes in flight, each value copied once out of hiredis's read
// buffer into a reused buffer of the tier's arena (bounded by the staging pool's size), read
// through the route like any record image (header for this key and geometry, then the payload
// checksum where it lands), and promoted into the tier in front (the local drives) in the
// background.
#include <optional>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {
/// One pipelined batch: the records [begin, stop) of a restore, each value the record's header
/// block then its payload (no padding).
struct Engine::Impl::RemoteFetch {
  struct Value {
    remote::OwnedValue value;  // the reply itself: no copy between the socket and placement
    bool arrived = false;
  };
  size_t begin = 0;
  size_t stop = 0;
  std::vector<Value> values;
  std::vector<remote::KeyOutcome> outcomes;
};

namespace {

using RemoteFetch = Engine::Impl::RemoteFetch;

RemoteFetch fetch(remote::ClusterClient& client, RemoteArena& arena, std::span<const Key128> keys,
                  size_t begin, size_t stop) {
  RemoteFetch f;
  f.begin = begin;
  f.stop = stop;
  std::vector<std::string> names;
  for (size_t i = begin; i < stop; ++i) names.push_back(remote_key(keys[i]));
  f.values.resize(names.size());
  const remote::ValueAllocator allocate = [&arena](size_t, size_t len) { return arena.lend(len); };
  f.outcomes = client.get_owned(
      names,
      [&f](size_t i, remote::OwnedValue value) {
        f.values[i].value = std::move(value);
        f.values[i].arrived = true;
      },
      &allocate);
  return f;
}

/// The record a fetched value must be to serve chunk `key` of `tokens` tokens: that key and size,
/// and the payload checksum its own header states. The read route's header check (check_header)
/// then decides, as for every tier, and the checksum is verified where the payload lands. nullopt
/// when the value is absent or of another size.
std::optional<RecordMeta> expected_record(const RemoteFetch::Value& value, const Key128& key,
                                          uint32_t tokens, const RecordShape& shape) {
  if (!value.arrived || value.value.bytes.size() <= kBlock) return std::nullopt;
  const uint64_t payload = value.value.bytes.size() - kBlock;
  if (!payload_size_fits(shape, tokens, payload)) return std::nullopt;
  // What the header states (its parent and checksum, kept when the record is promoted), with the
  // key and size this chunk needs (a coded record's value holds what it stores): a header that
  // states otherwise, or none, fails the check.
  RecordMeta want;
  (void)decode_header(value.value.bytes.first(kBlock), shape, want);
  want.key = key;
  want.token_count = tokens;
  want.payload_bytes = payload;
  return want;
}

}  // namespace

void Engine::Impl::restore_from_remote(RestoreJob& job, const Tier* tier) {
  const KvGeometry& g = options_.geometry;
  const uint32_t chunk = g.chunk_tokens;
  const size_t local = std::min(job.served(), job.found.size());
  // Chunks named by key hold exactly their own tokens (held_records), so the cluster goes on
  // from the first one this node lacks; a chain may go on from inside a partial last record.
  const size_t from =
      job.firsts.empty() ? remote_start(job.tokens, std::span(job.found).first(local)) : local;
  size_t end = from;
  while (end < job.keys.size() && job.first_token(end, chunk) + job.chunk_size(end, chunk) <=
                                      job.destination.params.capacity_tokens) {
    ++end;
  }
  if (end <= from) return;
  auto client = remote_->client();
  if (!client) {
    remote_->counters.remote_errors += end - from;
    return;
  }
  const std::shared_ptr<RemoteArena> arena = remote_arena_;
  read_route_->prefetch(
      from, end, kBlock + g.bytes_for_tokens(chunk),
      [&](size_t begin, size_t stop) {
        return fetch(*client, *arena, std::span<const Key128>(job.keys), begin, stop);
      },
      [&](RemoteFetch& batch) {
        return place_remote(batch, job, tier) == batch.stop - batch.begin;
      });
}

uint64_t Engine::Impl::place_remote(RemoteFetch& fetched, RestoreJob& job, const Tier* tier) {
  const KvGeometry& g = options_.geometry;
  const uint32_t chunk = g.chunk_tokens;
  const size_t count = fetched.stop - fetched.begin;
  const auto& outcomes = fetched.outcomes;
  auto& values = fetched.values;
  remote_->note(outcomes);
  // The prefix the cluster holds, of the size this geometry expects.
  std::vector<LocatedRecord> located;
  std::vector<std::span<const std::byte>> images;
  std::vector<uint64_t> first_tokens;
  for (size_t j = 0; j < count; ++j) {
    const uint64_t first = job.first_token(fetched.begin + j, chunk);
    const uint32_t tokens_here = job.chunk_size(fetched.begin + j, chunk);
    if (outcomes[j].state == remote::KeyState::kFailed) {
      remote_->counters.remote_errors += count - j;
      break;
    }
    if (outcomes[j].state == remote::KeyState::kAbsent) {
      remote_->counters.remote_absent++;
      break;
    }
    auto want = expected_record(values[j], job.keys[fetched.begin + j], tokens_here,
                                store_->record_shape());
    if (!want) {
      remote_->counters.remote_rejected++;
      break;
    }
    located.push_back({*want, nullptr});  // no file: the image is in host memory
    images.push_back(values[j].value.bytes);
    first_tokens.push_back(first);
  }
  if (images.empty()) return 0;
  auto landed = read_route_->read_images(located, std::move(images), first_tokens, job.destination);
  const Status failed = landed ? landed->status : landed.error();
  // Every record of the batch was written into the destination: one that did not verify leaves
  // its rows unspecified, so its chunk is no longer served by anyone.
  size_t intact = 0;
  while (failed.ok() && intact < located.size() &&
         landed->state(intact, located[intact].meta) == RecordState::kIntact) {
    ++intact;
  }
  for (size_t j = 0; j < located.size(); ++j) {
    job.serve(fetched.begin + j, j < intact ? RecordState::kIntact : RecordState::kIncomplete,
              located[j].meta.token_count, tier);
  }
  if (!failed.ok()) {
    job.result.problem = failed.with_context("placing records from the remote tier").to_string();
    return 0;
  }
  job.result.host_bytes += landed->host_bytes;
  if (intact < located.size()) remote_->counters.remote_rejected++;
  remote_->counters.remote_hits += intact;
  std::vector<RecordMeta> metas;
  std::vector<remote::OwnedValue> verified;
  for (size_t j = 0; j < intact; ++j) {
    metas.push_back(located[j].meta);
    verified.push_back(std::move(values[j].value));
  }
  if (Tier* front = tier_in_front_of(tier)) {
    if (job.promoting) {
      job.promoting = promote(std::move(metas), std::move(verified), *front);
    } else {
      // An earlier batch's records were dropped: these would follow a gap in the tier in front.
      remote_->counters.remote_write_drops += metas.size();
    }
  }
  return intact;
}

Result<std::vector<RemoteRecordKey>> Engine::Impl::remote_keys(
    std::span<const Token> tokens) const {
  KVTIER_EXPECTS(remote_ != nullptr, "remote_keys: the engine has no remote tier");
  const KvGeometry& g = options_.geometry;
  const std::vector<Key128> keys = chain_keys(namespace_, tokens, g.chunk_tokens);
  std::vector<RemoteRecordKey> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t here = std::min<uint64_t>(g.chunk_tokens, tokens.size() - i * g.chunk_tokens);
    // A record this node holds is in the cluster as stored here (coded or raw); of another, the
    // raw size is all that is known.
    const std::optional<LocatedRecord> local = store_->find(keys[i]);
    out.push_back({remote_key(keys[i]),
                   kBlock + (local ? local->meta.payload_bytes : g.bytes_for_tokens(here))});
  }
  return out;
}

bool Engine::Impl::promote(std::vector<RecordMeta> metas, std::vector<remote::OwnedValue> values,
                           Tier& into) {
  std::vector<uint64_t> held;
  for (const auto& v : values) held.push_back(v.bytes.size());
  return remote_->post_in_order(held, [&](size_t begin, size_t end) -> std::function<void()> {
    std::vector<RecordMeta> group(metas.begin() + static_cast<ptrdiff_t>(begin),
                                  metas.begin() + static_cast<ptrdiff_t>(end));
    std::vector<remote::OwnedValue> owned;
    for (size_t i = begin; i < end; ++i) owned.push_back(std::move(values[i]));
    return [this, &into, group = std::move(group), owned = std::move(owned)] {
      // A move between tiers: the verified images into the tier in front.
      std::vector<std::span<const std::byte>> images;
      for (const auto& v : owned) images.push_back(v.bytes);
      auto taken = into.accept(group, images);
      if (taken) {
        remote_->counters.remote_promoted += group.size();
      } else {
        KVTIER_LOG(log_, kWarn, "remote tier: promoting {} record(s) into the {}: {}", group.size(),
                   into.name(), taken.error().to_string());
      }
    };
  });
}

}  // namespace kvtier
