// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/export.hpp"
#include "kvtier/geometry.hpp"
#include "kvtier/status.hpp"

namespace kvtier {

/// @brief How store files are read and written on the host.
enum class IoPath : uint8_t {
  kAuto,  ///< Restores into CUDA memory through cuFile only where it reads peer-to-peer (not its
          ///< compatibility mode); otherwise, and for host memory, O_DIRECT through io_uring where
          ///< the filesystem allows it, else buffered. Every fallback is logged and in Stats.
  kDirect,    ///< O_DIRECT; where the filesystem refuses it, falls back to buffered and says so.
  kBuffered,  ///< Through the page cache (the baseline a naive engine gets).
  kGds,       ///< Restores into CUDA memory read through cuFile (GPUDirect Storage) into registered
         ///< device buffers, even where cuFile runs in its compatibility mode (reported as such);
         ///< where cuFile cannot open or register the store's files, the direct path is used and
         ///< the reason recorded. Host memory targets take the direct path.
};

KVTIER_EXPORT std::string_view io_path_name(IoPath path);
KVTIER_EXPORT Result<IoPath> parse_io_path(std::string_view name);

/// @brief How a TP-free store (store_format 2) keeps its records of 16-bit KV: on the drives, in
/// the DRAM tier and in the cluster alike (docs/format.md "Compressed records").
enum class Compression : uint8_t {
  kOff,      ///< every record raw
  kSplit16,  ///< each record of bf16/fp16 KV coded by split16 (lossless: each word's 8 exponent
             ///< bits as codes into a small per-block codebook, the sign and mantissa kept),
             ///< decoded on the host on the way into the destination; a record that does not
             ///< shrink by at least 1/20 is kept raw. Recurrent-state records are always raw.
};

KVTIER_EXPORT std::string_view compression_name(Compression compression);
KVTIER_EXPORT Result<Compression> parse_compression(std::string_view name);

/// @brief "4096", "64M", "1.5G", "2T" -> bytes: decimal digits, an optional fraction, then an
/// optional binary unit (K/M/G/T in either case, KiB/MiB/GiB/TiB, or B).
/// @return kInvalidArgument, naming the text and the grammar, for anything else (hex, exponents,
/// signs, spaces), a fraction that is not a whole number of bytes, or more than 64 bits.
[[nodiscard]] KVTIER_EXPORT Result<uint64_t> parse_size(std::string_view text);

/// @brief A size exactly, in the largest binary unit that divides it: "16 MiB", "1536 MiB",
/// "5000 B" (what parse_size reads back as the same number).
KVTIER_EXPORT std::string size_text(uint64_t bytes);

enum class LogLevel : uint8_t { kDebug, kInfo, kWarn, kError, kOff };

/// @brief A log sink the host application can inject. Called from any thread.
using LogSink = std::function<void(LogLevel, std::string_view)>;

/// @brief The shared remote tier: a Redis Cluster (or one Redis/Valkey server) behind the local
/// store, holding the same records under the same chained keys, so one node restores what another
/// saved. See README "Sharing KV across nodes".
struct KVTIER_EXPORT RemoteOptions {
  /// Seeds, "redis://host:port[,host:port...]"; empty disables the remote tier. No password here.
  std::string seeds;
  /// Name of the environment variable holding the password (read at open, never logged).
  std::string password_env;
  /// File holding the password, when password_env is empty (one trailing newline ignored).
  std::string password_file;
  /// Time to live of records written to the cluster, in seconds; 0: none (Redis's maxmemory
  /// policy, e.g. allkeys-lru, evicts).
  uint64_t ttl_seconds = 0;
  /// Bound on saved records waiting to be written behind to the cluster; a save queues its first
  /// records as far as there is room and leaves the rest out (counted in
  /// Stats::remote_write_drops), never waits.
  uint32_t queue_records = 4096;
  /// Bound on the bytes that work waiting in that queue holds: records fetched from the cluster
  /// and waiting to be copied into the local store (promotion). A hit that would pass it is served
  /// but not promoted (counted in Stats::remote_write_drops), so a backlog cannot hold GBs.
  uint64_t queue_bytes = uint64_t{1} << 30;
  uint32_t connect_timeout_ms = 500;   ///< per connection attempt
  uint32_t command_timeout_ms = 2000;  ///< per reply
  uint32_t connections_per_node = 4;   ///< parallel connections a batch uses per master
};

/// @brief Engine configuration. Fields left at their defaults may be overridden by `KVTIER_*`
/// environment variables (see docs/options.md); an explicitly set field always wins.
struct KVTIER_EXPORT Options {
  /// Root directory of the store; each TP rank keeps its own subdirectory `rank<R>of<W>`.
  std::string root;
  /// Roots on further drives, one per drive: the store spreads its segments over `root` and these,
  /// each drive with its own `rank<R>of<W>` and its own capacity_bytes. The order does not matter
  /// (the drive holding the index is found by its files); a drive missing or unreadable at open
  /// turns its records into misses (docs/format.md "Several drives"). Empty: one directory.
  std::vector<std::string> extra_roots;
  /// Shape of the KV this rank stores. A store keeps the geometry it was created with.
  KvGeometry geometry;
  /// 1: one store per TP rank, `rank<R>of<W>` on each drive (docs/format.md). 2: a TP-free store
  /// (docs/format.md "TP-free stores"): the model's KV heads in gcd(heads, max_tp) groups, one
  /// store each under `kvtier2/<model>/g<i>of<G>`, so that ranks of any TP size dividing max_tp
  /// (up to the model's KV heads) save and restore the same records, each reading only its heads.
  uint32_t store_format = 1;
  /// Format 2: the largest TP size the store serves (a power of two, 1..1024).
  uint32_t max_tp = 8;
  /// Format 2 with 16-bit KV (element_bytes 2): how new records are stored. Records of either kind
  /// are read whatever this says, so it may change between opens.
  Compression compression = Compression::kOff;
  /// Format 2 with more ranks than KV heads: a rank that reads a head group another rank writes
  /// waits this long at open for the writer to make its store (ranks start together).
  uint32_t writer_wait_ms = 30000;
  /// Optional tenant salt: keys saved under one tenant never match lookups of another.
  std::string tenant;
  /// Upper bound on the bytes the store takes on disk, per drive. 0: not asked for; the store's own
  /// (kept in its manifest), else KVTIER_CAPACITY_BYTES, else 64 GiB for a new store. Another value
  /// than an existing store's is logged at open and becomes the store's at this engine's first save
  /// (an engine that only reads never evicts for it).
  uint64_t capacity_bytes = 0;
  /// Size of one preallocated segment file. 0 picks 1 GiB (or capacity/4 when smaller) for a new
  /// store and takes an existing store's own; a store keeps the size it was created with, so a
  /// different value set here (or in KVTIER_SEGMENT_BYTES) is refused with kInvalidArgument.
  uint64_t segment_bytes = 0;
  /// Create the store when the directory holds none.
  bool create_if_missing = true;
  /// Open for reading only, without the store's lock: a snapshot of the index that neither waits
  /// for a writer nor keeps one out (kvtier ls, stat). Writes nothing; saves, evictions and drops
  /// are refused (kPermission). Restores read what the snapshot holds (its segment files stay
  /// open).
  bool read_only = false;
  /// Host I/O path for segment files. kAuto lets KVTIER_IO_PATH choose, else picks O_DIRECT.
  IoPath io_path = IoPath::kAuto;
  /// Size of one read or write request; requests of a restore are this size or smaller.
  /// 0: 16 MiB (large enough that per-request kernel work is small next to the copy, small
  /// enough for several in flight within the staging bound; docs/perf.md "Fast drives and tuning").
  uint64_t io_request_bytes = 0;
  /// Bound on staging memory, and so on the bytes in flight, per engine. 0: 128 MiB.
  uint64_t staging_bytes = 0;
  /// Read each drive in the pattern its read probe found (request size x requests in flight, kept
  /// in the drive's TUNING.json) whenever io_request_bytes and staging_bytes are both left 0 here
  /// and in the environment; at open, a writable store probes drives not yet tuned that hold
  /// enough written data (Engine::tune() probes on request). false: neither; the defaults above.
  bool tune = true;
  /// Bytes of the DRAM tier: pinned host memory holding the payloads of recently saved records in
  /// front of the disk; a hit restores with one copy to the device and no disk read. 0 (the
  /// default) disables it; KVTIER_DRAM_BYTES sets it when left 0 here.
  uint64_t dram_bytes = 0;
  /// Remote tier (off unless remote.seeds is set).
  RemoteOptions remote;
  /// Log sink; empty logs to stderr at the level of KVTIER_LOG_LEVEL (default warn).
  LogSink log_sink;
  /// Minimum level passed to the sink; unset: KVTIER_LOG_LEVEL, else kWarn.
  std::optional<LogLevel> log_level;

  /// Checks sizes and paths; fills zeros with their defaults in a copy.
  [[nodiscard]] Result<Options> resolved() const;
};

}  // namespace kvtier
