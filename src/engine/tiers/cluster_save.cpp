// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Writes to the remote tier: write-behind (after a save is durable, its records move from the local
// drives to the cluster in the background: read back through the read route, verified, and SET as
// header + payload), and
// sync (the local records the cluster lacks, found with STRLEN, sent the same way).
#include <fmt/format.h>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"
#include "engine/engine_impl.hpp"
#include "engine/tiers/cluster_link.hpp"

namespace kvtier {
namespace {

// Bytes read back and sent per pipelined batch: the worker's memory bound.
constexpr uint64_t kWriteWindowBytes = uint64_t{64} << 20;
// Records whose sizes sync asks the cluster for in one pipelined batch.
constexpr size_t kSyncBatch = 1024;

}  // namespace

void Engine::Impl::write_behind(std::span<const RecordMeta> records) {
  // Keys only (no record bytes held): the records are read back from the store when it runs.
  const std::vector<uint64_t> held(records.size(), 0);
  remote_->post_in_order(held, [&](size_t begin, size_t end) -> std::function<void()> {
    std::vector<Key128> keys;
    for (size_t i = begin; i < end; ++i) keys.push_back(records[i].key);
    return [this, keys = std::move(keys)] { write_behind_now(keys); };
  });
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

std::vector<RecordState> Engine::Impl::read_back(std::span<const LocatedRecord> records,
                                                 std::vector<AlignedBuffer>& images) {
  std::vector<RecordState> states(records.size(), RecordState::kIncomplete);
  std::vector<std::span<std::byte>> keep;
  for (const LocatedRecord& r : records) {
    images.emplace_back(kBlock + r.meta.payload_bytes);
    keep.push_back(images.back().span());
  }
  auto read = read_route_->read(kit_->posix_channel(), records, nullptr, {}, {}, keep);
  if (!read || !read->status.ok()) return states;
  for (size_t i = 0; i < records.size(); ++i) states[i] = read->state(i, records[i].meta);
  return states;
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
    // A window of records moved from the drives to the cluster through the read route: read back
    // and verified on the host (a record evicted and its segment reused since, or damaged, never
    // goes to the cluster), then SET.
    size_t stop = next;
    for (uint64_t bytes = 0; stop < records.size() && bytes < kWriteWindowBytes; ++stop)
      bytes += records[stop].meta.record_bytes();
    const std::span<const LocatedRecord> window = records.subspan(next, stop - next);
    next = stop;
    std::vector<AlignedBuffer> buffers;
    const std::vector<RecordState> states = read_back(window, buffers);
    std::vector<std::string> names;
    std::vector<std::span<const std::byte>> values;
    for (size_t i = 0; i < window.size(); ++i) {
      const RecordMeta& m = window[i].meta;
      if (states[i] != RecordState::kIntact) {
        failed(Status(ErrorCode::kCorrupt,
                      fmt::format("record {} no longer reads back intact from the local store "
                                  "(evicted meanwhile, or damaged: `kvtier verify` checks)",
                                  m.key.hex())));
        continue;
      }
      names.push_back(remote_key(m.key));
      values.push_back(buffers[i].span().first(kBlock + m.payload_bytes));
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
  return sync_records(tokens.empty() ? store_->all_records() : find_prefix(tokens), progress);
}

Result<RemoteSyncReport> Engine::Impl::sync_records(std::span<const LocatedRecord> records,
                                                    const ProgressFn& progress) {
  KVTIER_EXPECTS(remote_ != nullptr, "sync: the engine has no remote tier (Options::remote.seeds)");
  auto client = remote_->client();
  if (!client) return fail(ErrorCode::kIo, fmt::format("sync: remote tier {}", remote_->reason()));
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
