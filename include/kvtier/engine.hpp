// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvtier/export.hpp"
#include "kvtier/kv_view.hpp"
#include "kvtier/options.hpp"
#include "kvtier/stats.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

struct SaveResult {
  uint64_t tokens_stored = 0;   ///< Tokens of the request now in the store (new plus present).
  uint64_t chunks_written = 0;  ///< Records written by this call.
  uint64_t chunks_present = 0;  ///< Records that were already stored (prefix reuse).
  uint64_t bytes_written = 0;   ///< Payload bytes written by this call.
};

struct RestoreResult {
  /// Tokens of the request whose KV is now in the destination, verified. A prefix of the request:
  /// the longest stored prefix, cut at the first chunk that failed its checksum (that record is
  /// dropped and counted as a miss). Destination rows past it are unspecified.
  uint64_t tokens_restored = 0;
  uint64_t bytes_read = 0;       ///< Bytes read from storage, headers and padding included.
  uint64_t extents = 0;          ///< Contiguous file ranges the restore read.
  uint64_t checksum_misses = 0;  ///< Records found corrupt during this restore (now dropped).
  /// Records that failed a check on this restore's data path but verified when read again through
  /// the page cache (re-read before drop): kept, and served from that re-read when it verified
  /// again where it landed.
  uint64_t recheck_kept = 0;
  /// Host memory traffic of this restore, accounted from what the data path moved (not a hardware
  /// counter): O_DIRECT read 1x the bytes read (the drive's DMA into staging), buffered 3x (page
  /// cache write, kernel copy out of it), cuFile compat mode 2x (its bounce buffers), cuFile
  /// peer-to-peer 0; plus 1x per byte copied between host and GPU by DMA, or 2x per byte copied by
  /// the CPU (host-memory targets). The bounce path's minimum is 2x the payload.
  uint64_t host_bytes = 0;
  std::string problem;  ///< Why the restore stopped short of the stored prefix; empty if not.
};

struct CeilingResult {
  uint64_t bytes = 0;
  double seconds = 0;
};

/// A byte range of one store file.
struct FileExtent {
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// A record's key in the remote tier and the size of the value a restore expects under it.
struct RemoteRecordKey {
  std::string key;
  uint64_t value_bytes = 0;
};

/// What Engine::sync_remote did: every record it considered is counted in exactly one of
/// already_present, published and failed.
struct RemoteSyncReport {
  uint64_t records = 0;          ///< Local records considered.
  uint64_t already_present = 0;  ///< The cluster held them already (a value of the right size).
  uint64_t published = 0;        ///< Written to the cluster by this call.
  /// Not published: the cluster failed the check or the write, or the local record no longer
  /// read back intact (evicted meanwhile, or damaged). `problem` says why (the first reason).
  uint64_t failed = 0;
  std::string problem;
};

/// @brief The kvtier facade: saves a session's KV under chained prefix keys, finds the longest
/// stored prefix of a token sequence, restores it, evicts it.
///
/// Thread-safety: all methods may be called concurrently from any thread. One Engine owns its
/// rank's store directory; a second Engine (in this or another process) opening it gets kLocked.
class KVTIER_EXPORT Engine {
 public:
  /// @brief Opens (or creates) the store of `options.geometry`'s rank under `options.root`.
  /// @return kLocked when another engine holds it, kGeometryMismatch when the store was made for
  /// another geometry, kCorrupt when its index cannot be read, kInvalidArgument for bad options.
  [[nodiscard]] static Result<std::unique_ptr<Engine>> open(const Options& options);

  virtual ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// @brief Saves the KV of `tokens` from `source` (contiguous form, capacity >= tokens.size()).
  /// Chunks already stored are skipped. Returns once every new record is durable and visible.
  /// A trailing partial chunk is stored as its own record (see docs/format.md, "Keys").
  [[nodiscard]] Result<SaveResult> save(std::span<const Token> tokens, const ChunkedKv& source);

  /// @brief Saves from a paged KV cache: `source.block_table` lists, in token order, the blocks
  /// holding `tokens`. Same semantics as the contiguous form.
  [[nodiscard]] Result<SaveResult> save(std::span<const Token> tokens, const PagedKv& source);

  /// @brief A hybrid model's save (KvGeometry::state_layers > 0): the KV as above and `state`, the
  /// recurrent layers' state after the last of `tokens`, kept for that boundary. A save without
  /// the state keeps the KV, but no restore can start there until a save gives its state.
  [[nodiscard]] Result<SaveResult> save(std::span<const Token> tokens, const ChunkedKv& source,
                                        const StateMemory& state);
  [[nodiscard]] Result<SaveResult> save(std::span<const Token> tokens, const PagedKv& source,
                                        const StateMemory& state);

  /// @brief Tokens of the longest stored prefix of `tokens` (0 when none). Reads no payload.
  /// With a remote tier, the prefix held locally continues in the cluster: the chunks after it
  /// whose values the cluster holds, with the size a restore expects, are counted (one pipelined
  /// STRLEN per chunk, no value fetched), so the answer is what restore() would deliver if nothing
  /// changes in between and every record verifies. An unreachable cluster adds nothing.
  [[nodiscard]] Result<uint64_t> lookup(std::span<const Token> tokens);

  /// @brief Restores the longest stored prefix of `tokens` into `destination` and verifies every
  /// payload checksum on the way. A corrupt record is dropped and ends the prefix there.
  [[nodiscard]] Result<RestoreResult> restore(std::span<const Token> tokens,
                                              const ChunkedKv& destination);

  /// @brief Restores into a paged KV cache: token t lands in block block_table[t / block_size] at
  /// row t % block_size of every layer's tensor, in `destination.layout`.
  [[nodiscard]] Result<RestoreResult> restore(std::span<const Token> tokens,
                                              const PagedKv& destination);

  /// @brief A hybrid model's restore: the KV of the longest prefix that ends at a boundary where
  /// every layer's state is held (docs/format.md "Hybrid models"), and the recurrent layers'
  /// state there into `state`. A model with recurrent layers restores through these only.
  [[nodiscard]] Result<RestoreResult> restore(std::span<const Token> tokens,
                                              const ChunkedKv& destination,
                                              const StateMemory& state);
  [[nodiscard]] Result<RestoreResult> restore(std::span<const Token> tokens,
                                              const PagedKv& destination, const StateMemory& state);

  /// @brief Drops every stored record of `tokens`' chunks (the prefix chain and its partial tail).
  /// @return the number of records dropped.
  [[nodiscard]] Result<uint64_t> evict(std::span<const Token> tokens);

  /// @brief Reads and checks every record (header and payload checksums); drops the corrupt ones.
  [[nodiscard]] Result<VerifyReport> verify(const ProgressFn& progress = {});

  /// @brief Reads the records a restore of `tokens` would read (every live record when `tokens` is
  /// empty) with the engine's own I/O path and staging, but no device copy and no checksum: the
  /// read ceiling restores are compared against.
  [[nodiscard]] Result<CeilingResult> measure_read_ceiling(std::span<const Token> tokens = {});

  /// @brief The byte ranges of store files a restore of `tokens` would read (every live record when
  /// `tokens` is empty), records back to back in one file merged, in the order a restore reads
  /// them: so that an independent tool (fio, dd) can measure the drive on exactly those bytes.
  [[nodiscard]] Result<std::vector<FileExtent>> read_extents(std::span<const Token> tokens = {});

  /// @brief The remote tier's keys of every chunk of `tokens` (whether stored or not), in the
  /// order a restore asks for them, with each value's expected size: so that an independent
  /// client can measure the cluster on exactly the values a restore reads (a hybrid model: its
  /// full-attention chains). kInvalidArgument without a remote tier.
  [[nodiscard]] Result<std::vector<RemoteRecordKey>> remote_keys(std::span<const Token> tokens);

  /// @brief Publishes to the remote tier the local records the cluster lacks (or holds with a
  /// value of another size): those of `tokens`' stored prefix, or every local record when `tokens`
  /// is empty. Each is read back and checked before it is sent; waits until the writes are done.
  /// Records saved before the remote tier was configured, while the cluster was down, dropped by
  /// the full write-behind queue, or lost by the cluster (flushed, evicted) are sent again.
  /// @return kInvalidArgument without a remote tier, kIo when the cluster is unreachable.
  [[nodiscard]] Result<RemoteSyncReport> sync_remote(std::span<const Token> tokens = {},
                                                     const ProgressFn& progress = {});

  /// @brief Waits until the remote tier's write-behind queue is empty (records queued by earlier
  /// saves written, or failed); Stats then says how many were written, dropped and failed. Does
  /// nothing without a remote tier. The engine's destructor waits for the queue too.
  void wait_remote();

  /// @brief Drops the store files' pages from the page cache (posix_fadvise DONTNEED), so the next
  /// buffered read comes from the device.
  [[nodiscard]] Status drop_page_cache();

  [[nodiscard]] Stats stats() const;
  [[nodiscard]] std::vector<SegmentInfo> segments() const;
  /// The request size and staging this engine uses, where they came from, and each drive's tuning.
  [[nodiscard]] IoSettings io_settings() const;
  /// @brief Probes every drive that holds written data now (a few GB of reads each), keeps what
  /// it finds in the drive's TUNING.json and returns it; engines opened from then on use it. A
  /// drive whose probe fails keeps its earlier tuning, and says why. kPermission on a read-only
  /// store.
  [[nodiscard]] Result<IoSettings> tune();
  /// Directory holding this rank's store (format 2: that of the first head group it holds).
  [[nodiscard]] const std::string& store_dir() const;
  /// The geometry the store was created with.
  [[nodiscard]] const KvGeometry& geometry() const;

  class Impl;

 private:
  Engine(std::vector<std::unique_ptr<Impl>> parts, KvGeometry geometry);
  struct Delivered;
  Result<RestoreResult> delivered(Result<RestoreResult> result);
  /// Whether calls deliver what no single part counts (several parts, or a format-1 store).
  [[nodiscard]] bool counts_delivered() const;
  Result<CeilingResult> ceiling_of_parts(std::span<const Token> tokens);
  /// One per store this rank uses: its own (format 1), or each head group it holds (format 2).
  std::vector<std::unique_ptr<Impl>> parts_;
  /// A TP-free store's rank may find a store of its own TP layout in format 1 beside it: served
  /// read-only by lookups and restores (null: none).
  std::unique_ptr<Impl> format1_;
  KvGeometry geometry_;  ///< the rank's, as opened
  std::unique_ptr<Delivered> delivered_;
};

}  // namespace kvtier
