// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Restores from the remote tier: the chunks past the local prefix, fetched in pipelined batches
// with no more than the staging pool's bytes in flight, each value copied once out of hiredis's
// read buffer into a reused buffer of the tier's arena (bounded by the staging pool's size),
// checked like a record read from disk (header for this key and geometry, then the payload checksum
// where it lands), and promoted into the local store in the background.
#include <cstring>
#include <deque>
#include <functional>
#include <future>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"
#include "common/checksum.hpp"
#include "common/posix.hpp"
#include "engine/read_route.hpp"
#include "engine/remote_tier.hpp"

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

/// The header of a fetched value when it is the record `want` of this geometry, sized right.
std::optional<RecordMeta> check_value(const RemoteFetch::Value& value, const Key128& want,
                                      uint32_t tokens, const KvGeometry& g) {
  const uint64_t payload = g.bytes_for_tokens(tokens);
  const std::span<const std::byte> bytes = value.value.bytes;
  if (!value.arrived || bytes.size() != kBlock + payload) return std::nullopt;
  RecordMeta got;
  if (!decode_header(bytes.first(kBlock), g, got).ok()) return std::nullopt;
  if (got.key != want || got.token_count != tokens || got.payload_bytes != payload)
    return std::nullopt;
  return got;
}

}  // namespace

Engine::Impl::RemoteRestored Engine::Impl::restore_from_remote(std::span<const Token> tokens,
                                                               size_t first_chunk,
                                                               const KvTarget& destination,
                                                               RestoreResult& result) {
  const KvGeometry& g = options_.geometry;
  const uint64_t chunk = g.chunk_tokens;
  const std::vector<Key128> keys = chain_keys(namespace_, tokens, g.chunk_tokens);
  size_t end = first_chunk;
  while (end < keys.size() && std::min<uint64_t>((end + 1) * chunk, tokens.size()) <=
                                  destination.params.capacity_tokens) {
    ++end;
  }
  RemoteRestored out;
  if (end == first_chunk) return out;
  auto client = remote_->client();
  if (!client) {
    remote_->counters.remote_errors += end - first_chunk;
    return out;
  }
  // Bytes in flight bounded by the staging pool, as for a read from disk, and kept near it: small
  // batches of a quarter of the bound, the next ones sent as soon as the oldest has arrived, so the
  // cluster's nodes are not left idle while one batch waits for its slowest value.
  const uint64_t bound =
      std::max<uint64_t>(1, data_->staging().slot_bytes() * data_->staging().slot_count() /
                                (kBlock + g.bytes_for_tokens(g.chunk_tokens)));
  const uint64_t batch = std::max<uint64_t>(1, bound / 4);
  const size_t depth = std::max<uint64_t>(1, bound / batch);  // the batch being placed included
  const std::shared_ptr<RemoteArena> arena = remote_arena_;
  std::deque<std::future<RemoteFetch>> outstanding;  // waited for on every way out
  size_t sent = first_chunk;
  auto top_up = [&](size_t limit) {
    while (sent < end && outstanding.size() < limit) {
      const size_t stop = std::min<size_t>(end, sent + batch);
      outstanding.push_back(std::async(std::launch::async, fetch, std::ref(*client),
                                       std::ref(*arena), std::span<const Key128>(keys), sent,
                                       stop));
      sent = stop;
    }
  };
  top_up(depth);
  while (!outstanding.empty()) {
    RemoteFetch current = outstanding.front().get();
    outstanding.pop_front();
    top_up(depth - 1);
    const uint64_t got = place_remote(current, tokens, keys, destination, result, out.placed);
    out.chunks += got;
    if (got < current.stop - current.begin) break;  // the prefix ends here
  }
  return out;
}

uint64_t Engine::Impl::place_remote(RemoteFetch& fetched, std::span<const Token> tokens,
                                    std::span<const Key128> keys, const KvTarget& destination,
                                    RestoreResult& result, bool& placed) {
  const KvGeometry& g = options_.geometry;
  const uint64_t chunk = g.chunk_tokens;
  const size_t count = fetched.stop - fetched.begin;
  const auto& outcomes = fetched.outcomes;
  auto& values = fetched.values;
  remote_->note(outcomes);
  // The prefix the cluster holds, with headers that check out.
  std::vector<RecordMeta> metas;
  std::vector<LocatedRecord> located;
  std::vector<std::span<const std::byte>> payloads;
  std::vector<uint64_t> first_tokens;
  for (size_t j = 0; j < count; ++j) {
    const uint64_t first = (fetched.begin + j) * chunk;
    const auto tokens_here =
        static_cast<uint32_t>(std::min<uint64_t>(chunk, tokens.size() - first));
    if (outcomes[j].state == remote::KeyState::kFailed) {
      remote_->counters.remote_errors += count - j;
      break;
    }
    if (outcomes[j].state == remote::KeyState::kAbsent) {
      remote_->counters.remote_absent++;
      break;
    }
    auto meta = check_value(values[j], keys[fetched.begin + j], tokens_here, g);
    if (!meta) {
      remote_->counters.remote_rejected++;
      break;
    }
    metas.push_back(*meta);
    located.push_back({*meta, nullptr});  // no file: the payload is in host memory
    payloads.push_back(values[j].value.bytes.subspan(kBlock));
    first_tokens.push_back(first);
  }
  if (payloads.empty()) return 0;
  placed = true;
  auto landed = read_payloads(located, std::move(payloads), first_tokens, destination);
  const Status failed = landed ? landed->status : landed.error();
  if (!failed.ok()) {
    result.problem = failed.with_context("placing records from the remote tier").to_string();
    return 0;
  }
  result.host_bytes += landed->host_bytes;
  size_t intact = 0;
  while (intact < metas.size() && landed->state(intact, metas[intact]) == RecordState::kIntact) {
    ++intact;
  }
  if (intact < metas.size()) remote_->counters.remote_rejected++;
  remote_->counters.remote_hits += intact;
  for (size_t j = 0; j < intact; ++j) result.tokens_restored += metas[j].token_count;
  metas.resize(intact);
  std::vector<remote::OwnedValue> verified;
  for (size_t j = 0; j < intact; ++j) verified.push_back(std::move(values[j].value));
  promote(std::move(metas), std::move(verified));
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
    out.push_back({remote_key(keys[i]), kBlock + g.bytes_for_tokens(here)});
  }
  return out;
}

void Engine::Impl::promote(std::vector<RecordMeta> metas, std::vector<remote::OwnedValue> values) {
  const uint64_t count = metas.size();
  if (count == 0) return;
  uint64_t bytes = 0;
  for (const auto& v : values) bytes += v.bytes.size();
  remote_->post(count, bytes, [this, metas = std::move(metas), values = std::move(values)] {
    Status st = promote_now(metas, values);
    if (st.ok()) {
      remote_->counters.remote_promoted += metas.size();
    } else {
      KVTIER_LOG(log_, kWarn, "remote tier: promoting {} record(s) into the local store: {}",
                 metas.size(), st.to_string());
    }
  });
}

Status Engine::Impl::promote_now(std::span<const RecordMeta> fetched,
                                 std::span<const remote::OwnedValue> values) {
  std::vector<RecordMeta> records;
  std::vector<const std::byte*> bytes;
  for (size_t i = 0; i < fetched.size(); ++i) {
    if (store_->contains(fetched[i].key)) continue;  // saved or promoted meanwhile
    records.push_back(fetched[i]);
    bytes.push_back(values[i].bytes.data());
  }
  if (records.empty()) return {};
  std::vector<uint64_t> sizes;
  for (const RecordMeta& m : records) sizes.push_back(m.record_bytes());
  KVTIER_ASSIGN_OR_RETURN(std::vector<Placement> placements, store_->reserve(sizes));
  Status written;
  AlignedBuffer buffer;
  for (size_t i = 0; i < records.size() && written.ok(); ++i) {
    RecordMeta& m = records[i];
    m.segment = placements[i].file->id;
    m.offset = placements[i].offset;
    m.sequence = placements[i].sequence;
    if (buffer.size() < m.record_bytes()) buffer = AlignedBuffer(m.record_bytes());
    const std::span<std::byte> record = buffer.span().first(m.record_bytes());
    // A header of this store's own (its sequence), the payload as it verified, zero padding.
    encode_header(m, options_.geometry, namespace_, record.first(kBlock));
    std::memcpy(record.data() + kBlock, bytes[i] + kBlock, m.payload_bytes);
    std::memset(record.data() + kBlock + m.payload_bytes, 0,
                record.size() - kBlock - m.payload_bytes);
    written = store_->write_bytes(*placements[i].file, record, m.offset);
  }
  if (!written.ok()) {
    store_->abort(placements);
    return written;
  }
  return store_->commit(records, placements);
}

}  // namespace kvtier
