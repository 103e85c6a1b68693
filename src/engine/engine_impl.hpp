// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/keys.hpp"
#include "common/log.hpp"
#include "datapath/data_path.hpp"
#include "device/device.hpp"
#include "engine/counters.hpp"
#include "engine/dram_tier.hpp"
#include "engine/record_io.hpp"
#include "engine/remote_arena.hpp"
#include "engine/remote_tier.hpp"
#include "io/pipeline.hpp"
#include "kvtier/engine.hpp"
#include "store/store.hpp"

namespace kvtier {

/// What a re-read of a record that failed a check found (Engine::Impl::recheck).
enum class RecheckOutcome : uint8_t {
  kUnread,           ///< the re-read itself failed (I/O): no evidence, the record stays
  kCorrupt,          ///< failed again: corrupt
  kIntact,           ///< verified, and placed in the destination (when there is one)
  kIntactNotPlaced,  ///< verified on the host, but placing it failed: the record stays, a miss
};

/// What a read found of one record (read_route.hpp).
enum class RecordState : uint8_t;

/// Engine state. Thread-safe: the store locks itself, counters are atomic, staging is a pool.
class Engine::Impl {
 public:
  static Result<std::unique_ptr<Impl>> create(const Options& options);
  ~Impl();

  Result<SaveResult> save(std::span<const Token> tokens, const KvTarget& source);
  Result<uint64_t> lookup(std::span<const Token> tokens);
  Result<RestoreResult> restore(std::span<const Token> tokens, const KvTarget& destination);
  Result<uint64_t> evict(std::span<const Token> tokens);
  Result<VerifyReport> verify(const ProgressFn& progress);
  Result<CeilingResult> measure_read_ceiling(std::span<const Token> tokens);
  Result<std::vector<FileExtent>> read_extents(std::span<const Token> tokens);
  /// The cluster keys and value sizes of `tokens`' chunks (Engine::remote_keys).
  Result<std::vector<RemoteRecordKey>> remote_keys(std::span<const Token> tokens) const;
  Result<RemoteSyncReport> sync_remote(std::span<const Token> tokens, const ProgressFn& progress);
  Status drop_page_cache();
  Stats stats() const;

  /// The caller's KV memory checked against the geometry: kInvalidArgument when its size or shape
  /// does not match, kNotSupported when no device of this engine can address it.
  /// A paged target may skip blocks (kSkipBlock) only as a restore's destination.
  Result<KvTarget> target_of(const ChunkedKv& kv, bool restore) const;
  Result<KvTarget> target_of(const PagedKv& kv, bool restore) const;

  Options options_;
  Logger log_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<DramTier> dram_;  // null when Options::dram_bytes is 0
  /// Where remote values land (remote_arena.hpp), the staging pool's size, pinned with it: before
  /// data_, which unpins it when it goes. Null without a remote tier.
  std::shared_ptr<RemoteArena> remote_arena_;
  std::unique_ptr<DataPath> data_;  // devices, byte sources, staging
  Key128 namespace_;

  /// What reading a list of records found (defined in read_route.hpp).
  struct ReadOutcome;
  /// What one pipelined batch of GETs from the remote tier brought (defined in remote_restore.cpp).
  struct RemoteFetch;

 private:
  /// The stored records of the longest stored prefix of `tokens`, in token order.
  std::vector<LocatedRecord> find_prefix(std::span<const Token> tokens);
  /// The same, given `tokens`' chained chunk keys.
  std::vector<LocatedRecord> find_prefix(std::span<const Token> tokens,
                                         std::span<const Key128> keys);
  /// The one read route: reads `records` through `source`, checks headers and checksums, and
  /// restores into `destination` when given (verified where the bytes land). `first_tokens` gives
  /// each record's first token; empty means record i starts at i * chunk. An error before anything
  /// was read (the source cannot read these files) is returned as such.
  Result<ReadOutcome> read_records(ByteSource& source, std::span<const LocatedRecord> records,
                                   const KvTarget* destination, const ProgressFn& progress,
                                   std::span<const uint64_t> first_tokens = {});
  /// Places payloads the engine holds in host memory (`payloads[i]` that of `records[i]`, whose
  /// header was checked, or stood for by the DRAM tier's key and checksum) into `destination`
  /// through the read route, verified where they land.
  Result<ReadOutcome> read_payloads(std::span<const LocatedRecord> records,
                                    std::vector<std::span<const std::byte>> payloads,
                                    std::span<const uint64_t> first_tokens,
                                    const KvTarget& destination);
  /// Restores those of `records` (record r at token r * chunk) the DRAM tier holds into
  /// `destination`, setting served[r] for each whose bytes checked out (a bad copy is erased from
  /// the tier, to be read from disk instead).
  Status restore_from_dram(std::span<const LocatedRecord> records, const KvTarget& destination,
                           std::vector<bool>& served, uint64_t& host_bytes);
  /// Re-read before drop (recheck.cpp): reads each of `records`, which failed a check, once more
  /// through the page cache and verifies it on the host; a verified one is placed into
  /// `destination` (when given) at its first token and verified again there.
  std::vector<RecheckOutcome> recheck(std::span<const LocatedRecord> records,
                                      std::span<const uint64_t> first_tokens,
                                      const KvTarget* destination);
  /// Applies recheck() to the records of `states` found corrupt: kept ones become intact (placed)
  /// or incomplete (a miss), and both outcomes are counted. Returns the records kept.
  uint64_t recheck_corrupt(std::span<const LocatedRecord> records,
                           std::span<const uint64_t> first_tokens, const KvTarget* destination,
                           std::span<RecordState> states);
  /// Reads records from disk into `destination`: through the data path's source for it (cuFile
  /// where it is in use), falling back to POSIX when cuFile refuses the files.
  ReadOutcome read_from_disk(std::span<const LocatedRecord> records, const KvTarget& destination,
                             std::span<const uint64_t> first_tokens);
  /// Copies the stored records `present` (with their first tokens) the DRAM tier lacks into it
  /// from `source`.
  Status refresh_dram(std::span<const std::pair<RecordMeta, uint64_t>> present,
                      const KvTarget& source);
  /// The records of one save (defined in save.cpp).
  struct SaveBatch;
  /// Splits the chunks of `tokens` into those stored (`present`, with their first tokens; counted
  /// in `result`) and those to write (`batch`).
  void split_save(std::span<const Token> tokens, SaveBatch& batch,
                  std::vector<std::pair<RecordMeta, uint64_t>>& present, SaveResult& result);
  /// Checksums the batch's records on the device, places them in the store, plans their pieces
  /// and reserves their DRAM tier slabs.
  Status place_batch(SaveBatch& batch, DeviceTransfer& transfer);
  /// The one write route: builds each piece of `batch` in `target`'s staging (payload gathered
  /// from the transfer's KV, headers, padding) and writes it, on at most `slots` of the transfer's
  /// slots. kNotSupported when the target refuses the files before anything was written (the
  /// caller writes them the POSIX way).
  Status write_records(ByteSource& target, const SaveBatch& batch, DeviceTransfer& transfer,
                       size_t slots);

  /// Remote tier (remote_*.cpp): the chunk of `tokens` the cluster continues the local prefix
  /// `served` from: the one after it, or its last record's own chunk when that record is a partial
  /// chunk shorter than what `tokens` hold there (the cluster may hold the whole chunk, and more
  /// after it; the chain of keys goes on only from whole chunks).
  [[nodiscard]] size_t remote_start(std::span<const Token> tokens,
                                    std::span<const LocatedRecord> served) const;
  /// How many chunks from `first` on (a run) the cluster holds with values of the size a restore
  /// expects: pipelined STRLENs, no value fetched. 0 while the cluster is unreachable.
  uint64_t remote_run(std::span<const Token> tokens, std::span<const Key128> keys, size_t first);
  /// What restore_from_remote brought: chunks verified and placed (a prefix), and whether anything
  /// at all was written into the destination (a record that then failed its check included).
  struct RemoteRestored {
    uint64_t chunks = 0;
    bool placed = false;
  };
  /// Restores the chunks of `tokens` from `first_chunk` on that the cluster holds and that verify,
  /// into `destination`. Failures are misses, counted in the tier's Stats.
  RemoteRestored restore_from_remote(std::span<const Token> tokens, size_t first_chunk,
                                     const KvTarget& destination, RestoreResult& result);
  /// The end of restore(): the chunks past the `served` records of the local prefix `found`
  /// asked of the cluster (from a partial last one's own chunk, see remote_start); returns the
  /// chunks now served, and keeps `result.tokens_restored` a prefix.
  uint64_t continue_in_cluster(std::span<const Token> tokens, std::span<const LocatedRecord> found,
                               uint64_t served, const KvTarget& destination, RestoreResult& result);
  /// Checks and places one fetched batch of restore_from_remote into `destination`; returns how
  /// many of its records verified (a prefix).
  uint64_t place_remote(RemoteFetch& fetched, std::span<const Token> tokens,
                        std::span<const Key128> keys, const KvTarget& destination,
                        RestoreResult& result, bool& placed);
  /// Copies verified remote records (header + payload) into the local store, in the background.
  void promote(std::vector<RecordMeta> metas, std::vector<remote::OwnedValue> values);
  Status promote_now(std::span<const RecordMeta> metas, std::span<const remote::OwnedValue> values);
  /// Queues the durable records of a save for the cluster; never blocks.
  void write_behind(std::span<const RecordMeta> records);
  void write_behind_now(std::span<const Key128> keys);
  /// What publish() did with a list of records.
  struct Published {
    uint64_t written = 0;
    uint64_t failed = 0;  ///< unreadable or changed locally, or the write failed
    Status error;         ///< the first reason for a failure
  };
  /// Reads `records` back from the store, checks them, and SETs them in the cluster, in windows of
  /// bounded bytes; counts writes and failures in the tier's Stats too.
  Published publish(remote::ClusterClient& client, std::span<const LocatedRecord> records);

  mutable EngineCounters counters_;

 public:
  /// Declared last, so destroyed first: its worker drains while the store is still open.
  std::unique_ptr<RemoteTier> remote_;  // null when Options::remote.seeds is empty
};

}  // namespace kvtier
