// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Write-behind to the remote tier: after a save is durable, its records are read back from the
// local store in the background, checked, and SET in the cluster as header + payload.
#include "common/aligned_buffer.hpp"
#include "common/checksum.hpp"
#include "common/posix.hpp"
#include "engine/engine_impl.hpp"
#include "engine/remote_tier.hpp"

namespace kvtier {
namespace {

// Bytes read back and sent per pipelined batch: the worker's memory bound.
constexpr uint64_t kWriteWindowBytes = uint64_t{64} << 20;

}  // namespace

void Engine::Impl::write_behind(std::span<const RecordMeta> records) {
  std::vector<Key128> keys;
  for (const RecordMeta& m : records) keys.push_back(m.key);
  const uint64_t count = keys.size();
  // Keys only (no record bytes held): the records are read back from the store when it runs.
  remote_->post(count, 0, [this, keys = std::move(keys)] { write_behind_now(keys); });
}

void Engine::Impl::write_behind_now(std::span<const Key128> keys) {
  auto client = remote_->client();
  if (!client) {
    remote_->counters.write_errors += keys.size();
    return;
  }
  const KvGeometry& g = options_.geometry;
  size_t next = 0;
  while (next < keys.size()) {
    std::vector<AlignedBuffer> buffers;
    std::vector<std::string> names;
    std::vector<std::span<const std::byte>> values;
    uint64_t bytes = 0;
    for (; next < keys.size() && bytes < kWriteWindowBytes; ++next) {
      // Evicted or dropped since the save: nothing to send.
      auto located = store_->find(keys[next]);
      if (!located) continue;
      const RecordMeta& m = located->meta;
      AlignedBuffer buffer(m.record_bytes());
      const auto payload = buffer.span().subspan(kBlock, m.payload_bytes);
      // Only what still checks out goes to the cluster (a segment reused meanwhile does not).
      if (!pread_full(located->file->fd.get(), buffer.span(), m.offset).ok() ||
          !header_matches(buffer.span().first(kBlock), m, g) ||
          kvsum::of(payload.data(), payload.size()) != m.payload_checksum) {
        remote_->counters.write_errors++;
        continue;
      }
      names.push_back(remote_key(m.key));
      values.push_back(buffer.span().first(kBlock + m.payload_bytes));
      bytes += m.record_bytes();
      buffers.push_back(std::move(buffer));
    }
    if (names.empty()) continue;
    const auto outcomes = client->set(names, values, remote_->ttl());
    remote_->note(outcomes);
    for (const auto& o : outcomes) {
      if (o.state == remote::KeyState::kDone) {
        remote_->counters.writes++;
      } else {
        remote_->counters.write_errors++;
      }
    }
  }
}

}  // namespace kvtier
