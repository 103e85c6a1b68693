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

#include "common/aligned_buffer.hpp"
#include "common/keys.hpp"
#include "common/log.hpp"
#include "datapath/transfer_kit.hpp"
#include "device/device.hpp"
#include "engine/counters.hpp"
#include "engine/dram_tier.hpp"
#include "engine/read_route.hpp"
#include "engine/record_io.hpp"
#include "engine/tiers/cluster_arena.hpp"
#include "engine/tiers/cluster_link.hpp"
#include "engine/tiers/tier.hpp"
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

/// The engine's store. A follower (StorePart::follower) replaces it by a newer snapshot while
/// other calls run: `store_->f()` holds the store it calls until the call returns, and so does the
/// pointer get() returns while it is kept.
class StoreHandle {
 public:
  struct Held {
    std::shared_ptr<Store> store;
    Store* operator->() const { return store.get(); }
  };
  Held operator->() const { return {get()}; }
  [[nodiscard]] std::shared_ptr<Store> get() const {
    std::lock_guard lock(mu_);
    return store_;
  }
  void reset(std::shared_ptr<Store> store) {
    std::lock_guard lock(mu_);
    store_ = std::move(store);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<Store> store_;
};

/// Which part of a rank's KV one Impl keeps: all of it (format 1), or one head group of a TP-free
/// store (format 2, head_group_stores.cpp), whose records hold `options.geometry.kv_heads` of the
/// `memory_heads` heads of the caller's rows, from head `first_head` on.
struct StorePart {
  std::string dir_name;       ///< under each root; empty: rank<R>of<W>
  uint32_t memory_heads = 0;  ///< heads of a row of the caller's memory; 0: the geometry's
  uint32_t first_head = 0;
  /// Another rank writes this group: opened read-only, saves leave it alone.
  bool follower = false;
  /// A new store's capacity when none is asked for (Options and environment): the group's share
  /// of the default; 0: the default.
  uint64_t new_store_capacity = 0;
  uint32_t share_of_rank = 1;  ///< the parts the rank's memory bounds are split over
  /// The rank's staging is split over this many stores: this one takes its share of the staging the
  /// defaults (or sizes asked) give; io_settings_ keeps the rank's whole.
  uint32_t staging_split = 1;
  /// A TP-free model's stores that the rank reads at once (its head groups, windows and state): a
  /// tuning's staging (what one reader wants in flight, as the probe timed it) is split over them
  /// (tuned_share), so every rank puts the probe's bytes in flight at any TP size. 0: a tuning is
  /// split as staging_split says.
  uint32_t tuned_readers = 0;
  /// No DRAM tier, whatever the options or the environment ask (a follower, a read-only store
  /// served beside): it could only hold what a save writes through it.
  bool no_dram = false;
  /// A hybrid model's part (head_group_stores.cpp, hybrid.cpp): the kind of record it keeps
  /// (RecordKind), and which of the caller's `memory_layers` KV layers its records hold, in order
  /// (empty: all of them).
  uint32_t kind = 1;
  std::vector<uint32_t> layers;
  uint32_t memory_layers = 0;  ///< KV layers of the caller's memory; 0: the geometry's
  /// A hybrid model's part: the model and the part, in its keys' namespace (so that no part's key
  /// equals another model's, or another part's).
  std::string namespace_part;
};

/// A chunk of a save or restore named by its key (a hybrid model's sliding-window records from
/// some chunk on, its recurrent state at a boundary): tokens [first, first + tokens).
struct ChunkRef {
  Key128 key;
  Key128 parent;
  uint32_t tokens = 0;
  uint64_t first = 0;
};

/// Layer `layer`'s block table in `kv`: its own where layer_block_tables names one, else
/// block_table.
std::span<const int32_t> layer_block_table(const PagedKv& kv, uint32_t layer);

/// Chunks [first, ceil(end / chunk)) of a prefix of `end` tokens whose chained keys under `ns` are
/// `keys` (chain_keys of a token list at least that long, which agree with the prefix's up to its
/// end: `end` is a chunk boundary or the list's end).
std::vector<ChunkRef> chain_refs(const Key128& ns, std::span<const Key128> keys, uint32_t chunk,
                                 size_t first, uint64_t end);

/// Engine state. Thread-safe: the store locks itself, counters are atomic, staging is a pool.
class Engine::Impl {
 public:
  static Result<std::unique_ptr<Impl>> create(const Options& options, const StorePart& part = {});
  /// Takes the drives' tunings (probing those not yet tuned) as options_'s request size and
  /// staging, unless `asked` or the environment set either or tuning is off; whether they changed.
  Result<bool> apply_tuning(const Options& asked);
  /// Staging (and the remote tier's buffers, sized like it) again at options_'s tuned sizes, or
  /// at this store's `defaults` where the tuned ones cannot be had (`defaults_shown`: the sizes
  /// io_settings_ then says, the rank's whole where this store has a share of them).
  Status remake_host_buffers(std::unique_ptr<StagingPool>& staging, const IoSettings& defaults,
                             const IoSettings& defaults_shown);
  Result<IoSettings> tune();
  ~Impl();

  Result<SaveResult> save(std::span<const Token> tokens, const KvMemory& source);
  /// Saves `chunks` (the stored ones skipped), as save() does those of a token list.
  Result<SaveResult> save_chunks(std::span<const ChunkRef> chunks, const KvMemory& source);
  /// Restores `chunks` up to the first not held (locally: DRAM tier or drives), as restore()
  /// does a prefix; tokens_restored counts the tokens of the chunks restored intact, in order.
  Result<RestoreResult> restore_chunks(std::span<const ChunkRef> chunks,
                                       const KvMemory& destination);
  /// How many of `chunks`, from the first on, the local index holds.
  size_t held_chunks(std::span<const ChunkRef> chunks);
  /// Those records, located.
  std::vector<LocatedRecord> held_records(std::span<const ChunkRef> chunks);
  /// Drops the records of `chunks` the store holds; how many.
  Result<uint64_t> evict_chunks(std::span<const ChunkRef> chunks);
  /// Drops `keys` from every tier and the store; how many.
  Result<uint64_t> drop_keys(std::span<const Key128> keys);
  /// `tokens`' chunks under this part's namespace, `first_chunk` on.
  std::vector<ChunkRef> chunk_refs(std::span<const Token> tokens, size_t first_chunk = 0) const;
  Result<uint64_t> lookup(std::span<const Token> tokens);
  /// Tokens of the prefix of `tokens` the local index holds (find_prefix's records).
  uint64_t local_prefix(std::span<const Token> tokens);
  /// What lookup() answers, uncounted: the local prefix and what the tiers behind hold past it.
  uint64_t reachable_prefix(std::span<const Token> tokens);
  /// The same with the chain's keys of `tokens` given (chain_keys over this part's namespace).
  uint64_t reachable_prefix(std::span<const Token> tokens, std::span<const Key128> keys);
  /// Counts a lookup the facade answered from several parts (a hybrid model's).
  void count_lookup() { counters_.lookups++; }
  Result<RestoreResult> restore(std::span<const Token> tokens, const KvMemory& destination);
  Result<uint64_t> evict(std::span<const Token> tokens);
  Result<VerifyReport> verify(const ProgressFn& progress);
  /// After the store rebuilt its index at open: every record read and checked, the damaged dropped.
  void check_rebuilt_records();
  /// The records a restore of `tokens` reads from the drives (none given: every record).
  std::vector<LocatedRecord> read_plan(std::span<const Token> tokens);
  /// kvtier's own read of `records`, the bytes discarded; the file ranges they lie in.
  Result<CeilingResult> measure_read_ceiling(std::span<const LocatedRecord> records);
  std::vector<FileExtent> read_extents(std::span<const LocatedRecord> records) const;
  /// The cluster keys and value sizes of `tokens`' chunks (Engine::remote_keys).
  Result<std::vector<RemoteRecordKey>> remote_keys(std::span<const Token> tokens) const;
  Result<RemoteSyncReport> sync_remote(std::span<const Token> tokens, const ProgressFn& progress);
  /// Publishes those of `records` the cluster lacks (or holds with another size).
  Result<RemoteSyncReport> sync_records(std::span<const LocatedRecord> records,
                                        const ProgressFn& progress);
  Status drop_page_cache();
  Stats stats() const;

  /// The caller's KV memory checked against the geometry: kInvalidArgument when its size or shape
  /// does not match, kNotSupported when no device of this engine can address it.
  /// A paged target may skip blocks (kSkipBlock) only as a restore's destination.
  Result<KvMemory> kv_memory_of(const ChunkedKv& kv, bool restore) const;
  Result<KvMemory> kv_memory_of(const PagedKv& kv, bool restore) const;
  /// A recurrent-state part's view of the caller's state memory (one view per recurrent layer).
  Result<KvMemory> state_memory_of(const StateMemory& state) const;
  /// The geometry of the caller's memory: options_.geometry with the rank's heads (StorePart).
  KvGeometry memory_geometry() const;

  Options options_;
  StorePart part_;
  IoSettings io_settings_;  // the request size and staging options_ holds, and why
  Logger log_;
  StoreHandle store_;
  StoreConfig store_config_;  // what store_ was opened with (a follower opens it again)
  std::string store_dir_;     // store_'s directory, the same in every snapshot
  /// A follower: takes a newer snapshot of the group's store when its writer changed the index
  /// since the one it holds; keeps the one it holds when that fails (logged).
  void follow_writer();
  std::unique_ptr<DramTier> dram_;  // null when Options::dram_bytes is 0
  /// Where remote values land (cluster_arena.hpp), the staging pool's size, pinned with it: before
  /// kit_, which unpins it when it goes. Null without a remote tier.
  std::shared_ptr<RemoteArena> remote_arena_;
  std::unique_ptr<TransferKit> kit_;  // devices, channels, staging
  std::unique_ptr<ReadRoute> read_route_;
  /// The tiers in the order a restore asks them (tier_list.cpp).
  std::vector<std::unique_ptr<Tier>> tiers_;
  Key128 namespace_;

  /// What one pipelined batch of GETs from the remote tier brought (defined in
  /// cluster_restore.cpp).
  struct RemoteFetch;

  // What the tiers (tiers/) call: the local index's prefix, the re-read before drop, the halves of
  // a move between tiers, and the cluster tier's restore, lookup and write-behind.

  /// The stored records of the longest stored prefix of `tokens`, in token order.
  std::vector<LocatedRecord> find_prefix(std::span<const Token> tokens);
  /// The same, given `tokens`' chained chunk keys.
  std::vector<LocatedRecord> find_prefix(std::span<const Token> tokens,
                                         std::span<const Key128> keys);
  /// The partial-chunk records the local index holds that go on from the chunk boundary
  /// `boundary` of `tokens` (`keys`: their chained chunk keys) with `tokens`' own tokens, no
  /// further than `tokens` goes; longest first. Where a save ended inside a chunk.
  std::vector<RecordMeta> partial_chunks(std::span<const Token> tokens,
                                         std::span<const Key128> keys, uint64_t boundary);
  /// Applies recheck() to the records of `states` found corrupt: kept ones become intact (placed)
  /// or incomplete (a miss), and both outcomes are counted. Returns the records kept.
  uint64_t recheck_corrupt(std::span<const LocatedRecord> records,
                           std::span<const uint64_t> first_tokens, const KvMemory* destination,
                           std::span<RecordState> states);
  /// Writes verified record images (`images[i]`: records[i]'s header then payload) into the
  /// local store through the write route, skipping keys stored meanwhile; returns how many.
  Result<uint64_t> write_images(std::span<const RecordMeta> records,
                                std::span<const std::span<const std::byte>> images);
  /// Reads `records` from their files through the read route and the POSIX channel, verified on
  /// the host, into `images` (one buffer each, header then payload): the first half of a move
  /// between tiers. What each was found to be (incomplete, all of them, when the read failed).
  std::vector<RecordState> read_back(std::span<const LocatedRecord> records,
                                     std::vector<AlignedBuffer>& images);
  /// The chunk of `tokens` the cluster continues the local prefix `served` from
  /// (cluster_lookup.cpp): the one after it, or its last record's own chunk when that record is a
  /// partial chunk shorter than what `tokens` hold there (the cluster may hold the whole chunk,
  /// and more after it; the chain of keys goes on only from whole chunks).
  [[nodiscard]] size_t remote_start(std::span<const Token> tokens,
                                    std::span<const LocatedRecord> served) const;
  /// How many chunks from `first` on (a run) the cluster holds with values of the size a restore
  /// expects: pipelined STRLENs, no value fetched. 0 while the cluster is unreachable.
  uint64_t remote_run(std::span<const Token> tokens, std::span<const Key128> keys, size_t first);
  /// Which of `chunks` (named by key) the cluster holds with values of the size a restore
  /// expects: pipelined STRLENs, no value fetched. None without a cluster tier or while it is
  /// unreachable.
  std::vector<bool> remote_holds(std::span<const ChunkRef> chunks);
  /// Restores the chunks of `job` from the cluster, past those this node served (from a partial
  /// last one's own chunk, see remote_start), through the route's prefetch window.
  void restore_from_remote(RestoreJob& job, const Tier* tier);
  /// Queues the durable records of a save for the cluster; never blocks.
  void write_behind(std::span<const RecordMeta> records);

 private:
  /// Re-read before drop (recheck.cpp): reads each of `records`, which failed a check, once more
  /// through the page cache and verifies it on the host; a verified one is placed into
  /// `destination` (when given) at its first token and verified again there.
  std::vector<RecheckOutcome> recheck(std::span<const LocatedRecord> records,
                                      std::span<const uint64_t> first_tokens,
                                      const KvMemory* destination);
  /// The tiers' restore of `job`, whose stored prefix holds `prefix` tokens, and its accounting.
  Status run_restore(RestoreJob& job, uint64_t prefix);
  /// Copies the stored records `present` (with their first tokens) the DRAM tier lacks into it
  /// from `source`.
  Status refresh_dram(std::span<const std::pair<RecordMeta, uint64_t>> present,
                      const KvMemory& source);
  /// Makes a DRAM tier slab holding record `m`'s payload (after its header block) its image.
  void publish_image(const DramTier::Reservation& slab, const RecordMeta& m);
  /// The records of one save (defined in write_route.hpp).
  struct SaveBatch;
  /// Splits `chunks` into those stored (`present`, with their first tokens; counted
  /// in `result`) and those to write (`batch`).
  void split_save(std::span<const ChunkRef> chunks, SaveBatch& batch,
                  std::vector<std::pair<RecordMeta, uint64_t>>& present, SaveResult& result);
  /// Checksums the batch's records on the device, places them in the store, plans their pieces
  /// and reserves their DRAM tier slabs.
  Status place_batch(SaveBatch& batch, DeviceTransfer& transfer);
  /// Places the batch's records (checksummed) in the store and plans their pieces.
  Status reserve_batch(SaveBatch& batch);
  /// The save of a store that codes its records: checksums on the device, then a staging's worth
  /// at a time gathered into host memory, coded, written through the POSIX channel and finished.
  /// `batch.records` ends with what each record stores.
  Status save_coded(SaveBatch& batch, Device& device, const KvMemory& source);
  /// Commits the written `batch` (or aborts it after `written` failed), publishes or abandons its
  /// DRAM tier slabs and tells the tiers behind.
  Status finish_batch(SaveBatch& batch, Status written);
  /// The one write route (write_route.cpp): builds each piece of `batch` in `channel`'s staging
  /// (payload gathered from the transfer, headers, padding; a copy of each payload into its DRAM
  /// tier slab on the way) and writes it, on at most `slots` of the transfer's slots.
  /// kNotSupported when the channel refuses the files before anything was written (the caller
  /// writes them the POSIX way).
  Status write_records(Channel& channel, const SaveBatch& batch, DeviceTransfer& transfer,
                       size_t slots);
  /// Whether the cluster holds each of `keys` with a value a restore of `tokens[i]` tokens
  /// accepts; with `run`, asks no further batch once one holds a gap (a run's end).
  std::vector<bool> remote_fits(std::span<const Key128> keys, std::span<const uint32_t> tokens,
                                bool run);
  /// Checks and places one fetched batch of restore_from_remote into the job's destination;
  /// returns how many of its records verified (a prefix).
  uint64_t place_remote(RemoteFetch& fetched, RestoreJob& job, const Tier* tier);
  /// Moves verified remote records (header + payload) into the tier `into`, in the background;
  /// false when the queue refused some (those are counted as dropped).
  bool promote(std::vector<RecordMeta> metas, std::vector<remote::OwnedValue> values, Tier& into);
  /// The tier a restore asks just before `tier` (where its hits are promoted), or null.
  Tier* tier_in_front_of(const Tier* tier);
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
  /// Declared last, so destroyed first: its worker drains while the store and the tiers (which
  /// promotion moves records into) are still there.
  std::unique_ptr<ClusterLink> remote_;  // null when Options::remote.seeds is empty
};

}  // namespace kvtier
