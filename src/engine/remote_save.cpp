// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Writes to the remote tier: write-behind (after a save is durable, its records are read back from
// the local store in the background, checked, and SET in the cluster as header + payload), and
// sync (the local records the cluster lacks, found with STRLEN, sent the same way).
#include <fmt/format.h>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"
#include "common/checksum.hpp"
#include "common/posix.hpp"
#include "engine/engine_impl.hpp"
#include "engine/remote_tier.hpp"

namespace kvtier {
namespace {

// Bytes read back and sent per pipelined batch: the worker's memory bound.
constexpr uint64_t kWriteWindowBytes = uint64_t{64} << 20;
// Records whose sizes sync asks the cluster for in one pipelined batch.
constexpr size_t kSyncBatch = 1024;

/// Reads `r` back into `buffer` (sized to it); true when it still checks out: a segment reused
/// since the record was found (evicted meanwhile) or a damaged record never goes to the cluster.
bool read_back(Store& store, const LocatedRecord& r, const KvGeometry& g, AlignedBuffer& buffer) {
  const RecordMeta& m = r.meta;
  buffer = AlignedBuffer(m.record_bytes());
  const auto payload = buffer.span().subspan(kBlock, m.payload_bytes);
  return store.read_bytes(*r.file, buffer.span(), m.offset).ok() &&
         header_matches(buffer.span().first(kBlock), m, g) &&
         kvsum::of(payload.data(), payload.size()) == m.payload_checksum;
}

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
    remote_->counters.remote_write_errors += keys.size();
    return;
  }
  std::vector<LocatedRecord> records;
  for (const Key128& key : keys) {
    // Evicted or dropped since the save: nothing to send.
    if (auto located = store_->find(key)) records.push_back(std::move(*located));
  }
  (void)publish(*client, records);
}

Engine::Impl::Published Engine::Impl::publish(remote::ClusterClient& client,
                                              std::span<const LocatedRecord> records) {
  Published out;
  auto failed = [&](const Status& why) {
    ++out.failed;
    remote_->counters.remote_write_errors++;
    if (out.error.ok()) out.error = why;
  };
  size_t next = 0;
  while (next < records.size()) {
    std::vector<AlignedBuffer> buffers;
    std::vector<std::string> names;
    std::vector<std::span<const std::byte>> values;
    uint64_t bytes = 0;
    for (; next < records.size() && bytes < kWriteWindowBytes; ++next) {
      const RecordMeta& m = records[next].meta;
      AlignedBuffer buffer;
      if (!read_back(*store_, records[next], options_.geometry, buffer)) {
        failed(Status(ErrorCode::kCorrupt,
                      fmt::format("record {} no longer reads back intact from the local store "
                                  "(evicted meanwhile, or damaged: `kvtier verify` checks)",
                                  m.key.hex())));
        continue;
      }
      names.push_back(remote_key(m.key));
      values.push_back(buffer.span().first(kBlock + m.payload_bytes));
      bytes += m.record_bytes();
      buffers.push_back(std::move(buffer));
    }
    if (names.empty()) continue;
    const auto outcomes = client.set(names, values, remote_->ttl());
    remote_->note(outcomes);
    for (const auto& o : outcomes) {
      if (o.state == remote::KeyState::kDone) {
        ++out.written;
        remote_->counters.remote_writes++;
      } else {
        failed(o.error);
      }
    }
  }
  return out;
}

Result<RemoteSyncReport> Engine::Impl::sync_remote(std::span<const Token> tokens,
                                                   const ProgressFn& progress) {
  KVTIER_EXPECTS(remote_ != nullptr, "sync: the engine has no remote tier (Options::remote.seeds)");
  auto client = remote_->client();
  if (!client) return fail(ErrorCode::kIo, fmt::format("sync: remote tier {}", remote_->reason()));
  const std::vector<LocatedRecord> records =
      tokens.empty() ? store_->all_records() : find_prefix(tokens);
  RemoteSyncReport report;
  report.records = records.size();
  for (size_t begin = 0; begin < records.size(); begin += kSyncBatch) {
    const size_t stop = std::min(records.size(), begin + kSyncBatch);
    std::vector<std::string> names;
    for (size_t i = begin; i < stop; ++i) names.push_back(remote_key(records[i].meta.key));
    const auto sizes = client->sizes(names);
    remote_->note(sizes);
    std::vector<LocatedRecord> missing;
    for (size_t i = begin; i < stop; ++i) {
      const remote::KeyOutcome& o = sizes[i - begin];
      if (o.state == remote::KeyState::kFailed) {
        ++report.failed;
        if (report.problem.empty()) report.problem = o.error.to_string();
      } else if (o.state == remote::KeyState::kDone &&
                 o.size == kBlock + records[i].meta.payload_bytes) {
        ++report.already_present;
      } else {
        // Absent, or a value of another size (truncated, foreign): a restore would reject it.
        missing.push_back(records[i]);
      }
    }
    const Published sent = publish(*client, missing);
    report.published += sent.written;
    report.failed += sent.failed;
    if (report.problem.empty() && !sent.error.ok()) report.problem = sent.error.to_string();
    if (progress) progress(stop, records.size());
  }
  return report;
}

}  // namespace kvtier
