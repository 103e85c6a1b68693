// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// One rank's store directory: lock, manifest, segments, index, capacity and eviction.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file_system.hpp"
#include "common/log.hpp"
#include "kvtier/geometry.hpp"
#include "kvtier/stats.hpp"
#include "store/capacity.hpp"
#include "store/directory.hpp"
#include "store/drives.hpp"
#include "store/index_log.hpp"
#include "store/record_index.hpp"
#include "store/segment.hpp"
#include "store/segment_table.hpp"

namespace kvtier {

/// Where a new record goes.
struct Placement {
  std::shared_ptr<SegmentFile> file;
  uint64_t offset = 0;
  uint64_t sequence = 0;  ///< Store-wide write order, recorded in the header.
};

/// A record to be found with the file it lives in.
struct LocatedRecord {
  RecordMeta meta;
  std::shared_ptr<SegmentFile> file;
};

/// One drive of a store as a read probe sees it: where its tuning is kept (drive_tuning.hpp) and
/// its segment file holding the most written bytes.
struct DriveSample {
  uint32_t drive = 0;
  std::string dir;  ///< its rank directory
  bool available = true;
  std::string unwritable;  ///< why it takes no writes now (Drive::unwritable); empty when it does
  /// Segments a save is writing into are left out: their reserved bytes may not be written yet.
  std::shared_ptr<SegmentFile> largest;  ///< null when it holds no segment
  uint64_t largest_written = 0;          ///< bytes written at the start of `largest`
};

/// What a store is opened with: src/engine fills it from the resolved Options.
struct StoreConfig {
  /// The drives' roots: Options::root, then Options::extra_roots. Each holds rank<R>of<W>.
  std::vector<std::string> roots;
  KvGeometry geometry;
  /// The store's directory under each root; empty: `rank<R>of<W>` of the geometry's TP rank.
  std::string dir_name;
  /// Its records' format: 1 (a TP rank's), 2 (a head group's; RecordShape).
  uint32_t record_version = kFormatVersion;
  /// Format 2: the kind of record the store holds (RecordShape::kind).
  uint32_t record_kind = 1;
  /// Directories from a root to the store's: 1 for `rank<R>of<W>`.
  [[nodiscard]] uint32_t dir_depth() const;
  uint64_t capacity_bytes = 0;  ///< Per drive; the store keeps the one its manifest holds.
  uint64_t segment_bytes = 0;   ///< For a new store; an existing one keeps its own.
  bool create_if_missing = true;
  /// No lock, no writes: a snapshot of the index beside a writer (Options::read_only).
  bool read_only = false;
  bool try_direct_io = true;  ///< false: buffered I/O only (IoPath::kBuffered).
  /// Every file operation of the store goes through it.
  std::shared_ptr<FileSystem> fs = FileSystem::posix();

  /// The store's part of `o` (already resolved), over `fs`.
  [[nodiscard]] static StoreConfig of(const Options& o,
                                      std::shared_ptr<FileSystem> fs = FileSystem::posix());
};

/// What the caller chose explicitly, as opposed to defaults Options::resolved() filled in. A store
/// refuses another segment size than it was created with; another capacity it takes at the
/// engine's first save (both are kept in its manifest).
struct StoreRequest {
  std::optional<uint64_t> segment_bytes;   ///< Options::segment_bytes or KVTIER_SEGMENT_BYTES.
  std::string segment_bytes_source;        ///< Which of the two, for the message.
  std::optional<uint64_t> capacity_bytes;  ///< Options::capacity_bytes or KVTIER_CAPACITY_BYTES.
  std::string capacity_bytes_source;       ///< Which of the two, for the message.
};

/// @brief The store of one rank. Its one job: to keep its parts consistent under one lock, so that
/// a record is visible exactly when it is durable. The parts: StoreDirectory (lock and manifest),
/// CapacityBudget (what may be written), RecordIndex (which records are held), IndexLog (the
/// journal and checkpoint that make the index durable), SegmentTable (what each segment file holds,
/// its recency and pins: the eviction order), and the drives (drives.hpp). Its methods are grouped
/// by file: open (store_open.cpp), recovery (store_recovery.cpp), lookups, reservations, commits
/// and drops (store.cpp), journal appends and checkpoints (store_journal.cpp), capacity and
/// eviction order (eviction.cpp), placement of new segments on drives (placement.cpp). Thread-safe:
/// every public method takes the store's lock, and none holds it across payload I/O (only across
/// journal appends and segment creation). A store whose directory or index files may not be written
/// (EROFS, EACCES) is opened read-only under a shared lock: it serves lookups and reads, refuses
/// reserve() and drop(), and writes nothing. Writers and readers exclude each other (docs/format.md
/// "Access"), except that an open with Options::read_only takes no lock at all: it reads a snapshot
/// of the index beside a writer.
class Store {
 public:
  /// Opens or creates the store directory for `config`.
  [[nodiscard]] static Result<std::unique_ptr<Store>> open(const StoreConfig& config,
                                                           const Logger& log,
                                                           const StoreRequest& request = {});
  ~Store();

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] const KvGeometry& geometry() const { return shape_.geometry; }
  /// Directories from a drive's root to the store's on it (StoreConfig::dir_depth).
  [[nodiscard]] uint32_t dir_depth() const { return dir_depth_; }
  /// What its records hold and which header they carry.
  [[nodiscard]] const RecordShape& record_shape() const { return shape_; }
  [[nodiscard]] bool direct_io() const { return direct_; }
  [[nodiscard]] const std::string& direct_io_fallback() const { return direct_fallback_; }
  /// Opened read-only, and why (empty when writable).
  [[nodiscard]] bool read_only() const { return directory_.read_only(); }
  /// A snapshot's (Options::read_only): whether its writer has changed the index files since the
  /// snapshot was read, so that a newer one would hold more (or fewer) records.
  [[nodiscard]] bool index_changed() const;
  /// Whether this open rebuilt the index from segment headers (a damaged or missing checkpoint or
  /// journal): its records were taken by their headers, their payloads not read.
  [[nodiscard]] bool index_rebuilt() const { return index_rebuilt_; }
  [[nodiscard]] const std::string& read_only_reason() const {
    return directory_.read_only_reason();
  }

  /// The longest run of `keys` stored, in order, with their files; marks their segments used.
  [[nodiscard]] std::vector<LocatedRecord> find_chain(std::span<const Key128> keys);
  /// Stored partial-chunk records whose parent is `parent`.
  [[nodiscard]] std::vector<RecordMeta> partial_children(const Key128& parent);
  [[nodiscard]] std::optional<LocatedRecord> find(const Key128& key);
  [[nodiscard]] bool contains(const Key128& key);

  /// Reserves room for records of `sizes` bytes (in order, adjacent where they fit), evicting
  /// least recently used segments to stay within capacity. The segments stay pinned (not
  /// evictable) until commit() or abort().
  [[nodiscard]] Result<std::vector<Placement>> reserve(std::span<const uint64_t> sizes);
  /// Whether records of `sizes` could be reserved at all (reserve()'s admission, nothing placed
  /// or evicted): for a save that reserves its records a part at a time, asked once for the whole
  /// of it, so that a save that cannot fit costs none of the sessions stored.
  [[nodiscard]] Status admit(std::span<const uint64_t> sizes);
  /// Makes written records durable and visible: fdatasync of their segments, then one journal
  /// append. Keys stored meanwhile by another writer are skipped. Unpins the reservation.
  [[nodiscard]] Status commit(std::span<const RecordMeta> records,
                              std::span<const Placement> placements);
  /// Unpins a reservation whose writes failed; its space is left unused.
  void abort(std::span<const Placement> placements);

  /// Drops records from the index (durably); segments left empty are deleted. A read-only store
  /// refuses (kPermission) when any of them is stored, and changes nothing.
  [[nodiscard]] Status drop(std::span<const Key128> keys);
  /// Drops records found corrupt: as drop() where the store may be written; a read-only snapshot
  /// (a follower's restores) forgets them in memory only, so that it stops serving them and
  /// its writer, reading them itself, drops them on disk.
  [[nodiscard]] Status drop_corrupt(std::span<const Key128> keys);

  /// Reads `out.size()` bytes of segment `file` at `offset` through the store's FileSystem.
  [[nodiscard]] Status read_bytes(const SegmentFile& file, std::span<std::byte> out,
                                  uint64_t offset);
  /// `file` opened anew through the page cache (through the store's FileSystem): the second path
  /// a record that failed a check is read by.
  [[nodiscard]] Result<std::shared_ptr<SegmentFile>> reopen_buffered(const SegmentFile& file);
  /// Writes bytes of a reserved record through the store's FileSystem (commit() syncs them).
  [[nodiscard]] Status write_bytes(const SegmentFile& file, std::span<const std::byte> bytes,
                                   uint64_t offset);

  /// Every live record, grouped by segment and in file order.
  [[nodiscard]] std::vector<LocatedRecord> all_records();
  [[nodiscard]] std::vector<SegmentInfo> segments();
  /// Every drive, in the store's order, with its largest written segment.
  [[nodiscard]] std::vector<DriveSample> drive_samples();
  [[nodiscard]] uint64_t segment_bytes();
  [[nodiscard]] FileSystem& file_system() { return *fs_; }
  /// Fills the store part of `stats`.
  void fill_stats(Stats& stats);

 private:
  using Segment = SegmentState;

  /// How a reservation would be laid out: the same first-fit walk reserve() makes.
  struct PlacementPlan {
    uint64_t new_segments = 0;
    bool uses_active = false;  ///< Its first records go into the active segment.
  };

  Store() = default;
  [[nodiscard]] static Result<std::unique_ptr<Store>> open_once(const StoreConfig& config,
                                                                const Logger& log,
                                                                const StoreRequest& request);
  Status load_or_create_manifest(const StoreConfig& config, const StoreRequest& request);
  Status write_manifest() const;
  /// Takes a capacity other than the manifest's as pending, once it is known to be usable.
  Status request_capacity(uint64_t requested, const std::string& source);
  /// Makes a pending capacity the store's: kept in the manifest, said in the log.
  Status apply_pending_capacity_locked();
  Status load_index();
  /// Opens the segment files `ids` (id, drive) and measures what each takes on disk.
  Status open_segments_locked(std::span<const std::pair<uint32_t, uint32_t>> ids);
  /// Finds the other drives, probes O_DIRECT on each (`config.try_direct_io` allowing).
  Status open_drives_and_probe(const StoreConfig& config, std::span<const std::string> others);
  /// Raises the open-file limit to what this store keeps open when full, or warns that it cannot.
  void make_room_for_open_files() const;
  Status adopt_records(std::vector<RecordMeta> records, std::span<const uint32_t> dropped,
                       const std::unordered_map<uint32_t, uint64_t>& uses);
  /// Sizes the budget for `capacity` and `segment_bytes` (kInvalidArgument, changing nothing, when
  /// it cannot hold one segment and the index files).
  Status resize_budget(uint64_t capacity, uint64_t segment_bytes);
  /// How long the journal may grow before it is compacted into a checkpoint.
  uint64_t journal_budget_locked() const;
  /// What the index files may take on disk with `records` live in `segments` segments.
  uint64_t index_bytes_locked(uint64_t records, uint64_t segments) const;
  /// What the store may take on disk once `extra_segments` more segments exist.
  uint64_t used_locked(uint64_t extra_segments) const;
  PlacementPlan plan_placement_locked(std::span<const uint64_t> sizes) const;
  /// kCapacity when `sizes` cannot be placed even after evicting everything evictable.
  Status admit_locked(std::span<const uint64_t> sizes) const;
  /// What drive `drive` takes, `extra_segments` more segments on it and `extra_total` in the store.
  uint64_t used_on_locked(uint32_t drive, uint64_t extra_segments, uint64_t extra_total) const;
  /// What the store may take on drive `drive`: the capacity, or less where its file system holds
  /// less (Drive::fs_limit).
  uint64_t capacity_on(uint32_t drive) const;
  /// New segments that fit on the drives taking them once every segment not pinned is evicted.
  uint64_t room_for_segments_locked() const;
  /// Drive `drive`'s file system refused a new segment (`why`, ENOSPC): takes what the store holds
  /// there and what is free as its limit there from now on (eviction then makes room within it),
  /// or refuses (kNoSpace, with the numbers) when the `still_needed` segments of the reservation
  /// cannot fit even after evicting everything evictable.
  Status learn_file_system_limit_locked(uint32_t drive, const Status& why, uint64_t still_needed);
  /// Makes drive `drive` take no new segments until the store reopens (its records are still
  /// served), for `why`. The home drive, which holds the index, is never taken out.
  void take_out_of_placement_locked(uint32_t drive, std::string why);
  /// A save's segment file deleted while it was written (st_nlink 0: its drive wiped or removed):
  /// kNotFound naming it, and its drive takes no new segments. Ok when `file` is still linked.
  Status check_still_linked(const SegmentFile& file);
  /// Evicts least recently used segments until every drive that takes new segments fits its
  /// capacity, `extra_segments` more on drive `drive` counted. Drives taking none are left alone:
  /// evicting there would drop records to free room no segment can use.
  Status enforce_capacity_locked(uint64_t extra_segments, uint32_t drive = 0);
  /// The drive a new segment goes on: the one with the most room, evicting the least recently
  /// used segments of the store when none has room for it.
  Result<uint32_t> drive_for_new_segment_locked();
  /// The least recently used segment not pinned, on `drive` (when unset, on any drive taking new
  /// segments); null if none.
  const Segment* lru_locked(std::optional<uint32_t> drive) const;
  /// Drives new segments may go on (Drive::takes_new_segments).
  uint64_t writable_drives() const;
  uint64_t offline_drives() const;
  /// Opens the segments of every available drive; `ids` gets them all, ascending.
  Status list_all_segments(std::vector<std::pair<uint32_t, uint32_t>>& found) const;
  /// Makes a new segment for a reservation that needs `still_needed` new segments, this one
  /// included.
  Result<Segment*> new_segment_locked(uint64_t still_needed);
  /// Unpins a reservation's segments and forgets its records.
  void release_locked(std::span<const Placement> placements);
  /// Records what segment `seg` takes on disk, raising the estimate for new ones when it is short.
  Status measure_segment_locked(Segment& seg);
  /// Journals the drop of segment `id`, then deletes its file. On a full file system, where even
  /// the journal entry finds no room, the file goes first (an index entry of a missing segment is
  /// dropped at open, which is what the drop says) and the drop is journaled in the room it left.
  Status evict_segment_locked(uint32_t id);
  /// Deletes segment `seg`'s file; its drive's directory is synced at the next checkpoint.
  void remove_segment_file_locked(const Segment& seg);
  Status drop_locked(std::span<const Key128> keys);
  void index_add_locked(const RecordMeta& meta);
  void index_remove_locked(const RecordMeta& meta);
  Status checkpoint_locked();
  /// Appends the highest id handed out to the journal where its segment is gone and the journal
  /// names no id as high (`journal_names`: the highest it does); a failure is a warning.
  void keep_highest_id_locked(uint32_t journal_names);
  /// Whether an id was handed out and the segment of the highest is gone.
  bool highest_id_gone_locked() const;
  /// Makes `entries` durable, preceded by the segment uses not yet recorded, and calls `apply` on
  /// each once it is. The journal is compacted into a checkpoint first wherever an append would
  /// take it past its budget; a long list goes in batches, each applied before the next.
  Status append_locked(std::span<const JournalEntry> entries,
                       const std::function<void(const JournalEntry&)>& apply = {});
  /// Marks `seg` used now; records the uses when they have waited kUseFlushInterval.
  void touch_locked(Segment& seg);
  std::vector<RecordMeta> live_records_locked() const;

  const Logger* log_ = nullptr;
  std::shared_ptr<FileSystem> fs_;
  std::string dir_;
  RecordShape shape_{KvGeometry{}};  // the geometry and record format the store was opened for
  std::string index_stamp_;  // the index files' identities and sizes when the index was read
  uint32_t dir_depth_ = 1;   // StoreConfig::dir_depth
  // A capacity this engine asked for that the store does not have yet. It takes effect at the
  // first save, so an engine that only reads never evicts for a smaller one (docs/format.md).
  std::optional<uint64_t> pending_capacity_;  // guarded by mu_
  std::string pending_capacity_source_;
  bool direct_ = false;
  std::string direct_fallback_;
  StoreDirectory directory_;  // lock and manifest

  // drives_[0] is dir_, the home holding the index; a one-directory store has only it. Fixed at
  // open but for `unwritable` and `fs_limit`, which are guarded by mu_.
  std::vector<Drive> drives_;
  std::string store_id_;
  std::vector<std::string> unreachable_;  // listed directories that could not be reached at open

  std::mutex mu_;
  uint64_t drive_misses_ = 0;  // lookups stopped by a record on a missing drive; guarded by mu_
  std::optional<IndexLog> journal_;  // guarded by mu_
  RecordIndex index_;                // guarded by mu_
  SegmentTable segments_;            // guarded by mu_
  uint32_t active_ = 0;              // segment receiving appends; 0 when none
  uint32_t next_id_ = 1;
  // One clock for record sequences and segment uses, so a segment's recency after a reopen is the
  // later of its newest record and its last recorded use.
  uint64_t sequence_ = 0;
  std::optional<std::chrono::steady_clock::time_point> unsaved_since_;  // oldest unrecorded use
  uint64_t evicted_segments_ = 0;
  uint64_t evicted_records_ = 0;
  uint64_t recovered_records_ = 0;
  bool index_rebuilt_ = false;
  uint64_t dropped_at_open_ = 0;

  // Capacity bounds everything the store writes (docs/format.md "Capacity"): the segments' measured
  // disk bytes plus what the index files may take.
  CapacityBudget budget_;          // guarded by mu_ once open
  uint64_t reserved_records_ = 0;  // reserved, not yet committed or aborted
};

}  // namespace kvtier
