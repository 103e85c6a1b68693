// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Store::open: the directory, its lock, the manifest, and the index loaded (or rebuilt) from disk.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/posix.hpp"
#include "common/try.hpp"
#include "store/store.hpp"

namespace kvtier {
namespace {

constexpr const char* kManifestName = "MANIFEST.json";
constexpr const char* kLockName = "LOCK";

// What a store on read-only media, or one of another user's we may read, answers a write with.
bool may_not_write(int err) { return err == EROFS || err == EACCES || err == EPERM; }

// What MANIFEST.json holds. A manifest written before stores kept their capacity has none.
struct Manifest {
  KvGeometry geometry;
  uint64_t segment_bytes = 0;
  std::optional<uint64_t> capacity_bytes;
};

nlohmann::json manifest_json(const KvGeometry& g, uint64_t segment_bytes, uint64_t capacity_bytes) {
  return {{"format", "kvtier-store"},
          {"format_version", kFormatVersion},
          {"model_id", g.model_id},
          {"layers", g.layers},
          {"kv_heads", g.kv_heads},
          {"head_dim", g.head_dim},
          {"element_bytes", g.element_bytes},
          {"chunk_tokens", g.chunk_tokens},
          {"tp_rank", g.tp_rank},
          {"tp_world", g.tp_world},
          {"segment_bytes", segment_bytes},
          {"capacity_bytes", capacity_bytes}};
}

Result<Manifest> parse_manifest(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != "kvtier-store")
      return fail(ErrorCode::kCorrupt, "MANIFEST.json: not a kvtier store");
    if (j.at("format_version").get<uint32_t>() != kFormatVersion) {
      return fail(ErrorCode::kFormatVersion,
                  fmt::format("store format version {} (this build reads {})",
                              j.at("format_version").get<uint32_t>(), kFormatVersion));
    }
    Manifest m;
    m.geometry = {j.at("model_id"),      j.at("layers"),       j.at("kv_heads"), j.at("head_dim"),
                  j.at("element_bytes"), j.at("chunk_tokens"), j.at("tp_rank"),  j.at("tp_world")};
    m.segment_bytes = j.at("segment_bytes").get<uint64_t>();
    if (j.contains("capacity_bytes")) m.capacity_bytes = j.at("capacity_bytes").get<uint64_t>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kCorrupt, fmt::format("MANIFEST.json unreadable: {}", e.what()));
  }
}

// One directory given twice, however it is spelled (X and X/, X/., a symlink to X, a bind mount of
// X), would be two drives of one store in one place: two drive markers side by side and its
// capacity counted twice. Refused before anything is written.
Status refuse_repeated_roots(FileSystem& files, std::span<const std::string> roots) {
  namespace fs = std::filesystem;
  struct Seen {
    std::string root;
    fs::path path;  // absolute, with symlinks resolved as far as it exists
    std::optional<std::pair<uint64_t, uint64_t>> inode;
  };
  std::vector<Seen> seen;
  for (const std::string& root : roots) {
    std::error_code ec;
    fs::path path = fs::weakly_canonical(fs::absolute(root, ec), ec);
    if (ec) path = fs::absolute(root, ec).lexically_normal();
    if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
    std::optional<std::pair<uint64_t, uint64_t>> inode;
    if (auto info = files.stat(root)) inode.emplace(info->device, info->inode);
    for (const Seen& s : seen) {
      if (s.path != path && !(inode && s.inode == inode)) continue;
      return {ErrorCode::kInvalidArgument,
              fmt::format("{} and {} are the same directory ({}): listed twice, it would be two "
                          "drives of one store in one place; list each drive once",
                          s.root, root, path.string())};
    }
    seen.push_back({root, std::move(path), inode});
  }
  return {};
}

/// The rank directory on each drive: root's first, then extra_roots'.
std::vector<std::string> store_dirs(const StoreConfig& config) {
  std::vector<std::string> dirs;
  for (const std::string& root : config.roots) {
    dirs.push_back(
        fmt::format("{}/rank{}of{}", root, config.geometry.tp_rank, config.geometry.tp_world));
  }
  return dirs;
}

/// The rank directory holding the index (the first listed when none does yet).
std::string store_dir(const StoreConfig& config) {
  const std::vector<std::string> dirs = store_dirs(config);
  auto home = find_home(*config.fs, dirs, true);
  return dirs[home ? *home : 0];
}

// A writer never rewrites the checkpoint in place (a new file is renamed over it) and only
// appends to the journal between checkpoints, which also empty it.
constexpr int kSnapshotAttempts = 20;

struct FileState {
  bool exists = false;
  uint64_t ino = 0;
  uint64_t size = 0;
  timespec mtime{};
};

FileState file_state(FileSystem& fs, const std::string& path) {
  auto info = fs.stat(path);
  if (!info) return {};
  return {true, info->inode, info->size, info->mtime};
}

struct IndexFiles {
  FileState checkpoint;
  FileState journal;
  /// Whether the index read between `before` and these can only have been one state of it.
  bool continues(const IndexFiles& before) const {
    auto same = [](const FileState& a, const FileState& b) {
      return a.exists == b.exists && a.ino == b.ino && a.size == b.size &&
             a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
    };
    return same(checkpoint, before.checkpoint) && journal.exists == before.journal.exists &&
           journal.ino == before.journal.ino && journal.size >= before.journal.size;
  }
};

IndexFiles index_files(FileSystem& fs, const std::string& dir) {
  return {file_state(fs, fmt::format("{}/{}", dir, IndexLog::kCheckpointName)),
          file_state(fs, fmt::format("{}/{}", dir, IndexLog::kJournalName))};
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const StoreConfig& config, const Logger& log,
                                           const StoreRequest& request) {
  if (!config.read_only) return open_once(config, log, request);
  // Without the lock a writer may checkpoint, append or evict while the index is read. An open
  // whose index files were the same before and after read one state of the index (a journal that
  // only grew was read up to an entry boundary: an earlier state); otherwise it is read again.
  const std::string dir = store_dir(config);
  for (int attempt = 1;; ++attempt) {
    const IndexFiles before = index_files(*config.fs, dir);
    auto store = open_once(config, log, request);
    const bool settled = index_files(*config.fs, dir).continues(before);
    if (settled || attempt == kSnapshotAttempts) {
      if (!settled) {
        return fail(ErrorCode::kLocked,
                    fmt::format("store {}: its writer changed the index under each of {} reads of "
                                "it",
                                dir, kSnapshotAttempts));
      }
      return store;
    }
  }
}

Result<std::unique_ptr<Store>> Store::open_once(const StoreConfig& config, const Logger& log,
                                                const StoreRequest& request) {
  if (config.roots.empty() || !config.fs) {
    return fail(ErrorCode::kInvalidArgument, "a store needs a root and a file system");
  }
  std::unique_ptr<Store> store(new Store());
  store->log_ = &log;
  store->fs_ = config.fs;
  FileSystem& fs = *config.fs;
  store->geometry_ = config.geometry;
  store->capacity_ = config.capacity_bytes;
  KVTIER_TRY(refuse_repeated_roots(fs, config.roots));
  const std::vector<std::string> rank_dirs = store_dirs(config);
  KVTIER_ASSIGN_OR_RETURN(size_t home,
                          find_home(fs, rank_dirs, config.create_if_missing && !config.read_only));
  store->dir_ = rank_dirs[home];
  std::vector<std::string> others;
  for (size_t i = 0; i < rank_dirs.size(); ++i) {
    if (i != home) others.push_back(rank_dirs[i]);
  }
  if (!config.create_if_missing || config.read_only) {
    // Only ENOENT means there is no store; EACCES on a directory we may not search is a store we
    // may not read, and saying "not found" would send the user looking in the wrong place.
    if (auto there = fs.stat(store->dir_); !there) {
      const int err = there.error().native_error();
      if (err == ENOENT)
        return fail(ErrorCode::kNotFound, fmt::format("no store at {}", store->dir_));
      return fail(posix_error(err, fmt::format("cannot reach the store at {}", store->dir_)));
    }
  }
  // KV is user data: a directory kvtier makes is 0700; one that exists keeps its owner's mode.
  KVTIER_TRY(make_dir_durable(fs, std::filesystem::path(store->dir_).parent_path().string()));
  KVTIER_TRY(make_dir_durable(fs, store->dir_));
  if (config.read_only) {
    store->read_only_ = true;
    store->read_only_reason_ = "opened for reading only (Options::read_only)";
  } else {
    KVTIER_TRY(store->lock_directory());
  }
  KVTIER_TRY(store->load_or_create_manifest(config, request));
  if (!store->read_only_) store->remove_stale_files();
  KVTIER_TRY(store->open_drives_and_probe(config, others));
  store->make_room_for_open_files();
  KVTIER_TRY(store->load_index());
  return store;
}

void Store::make_room_for_open_files() const {
  // Every segment stays open (its descriptor is what reads and cuFile's handles use): a full store
  // on large drives holds thousands, past the 1024 many systems give a process by default.
  constexpr uint64_t kBesideSegments = 256;  // the index files, sockets, the I/O engines, CUDA
  const uint64_t wanted = drives_.size() * (capacity_ / segment_bytes_ + 8) + kBesideSegments;
  const uint64_t limit = raise_open_file_limit(wanted);
  if (limit < wanted) {
    KVTIER_LOG(*log_, kWarn,
               "{}: when full this store keeps up to {} files open, but this process may open only "
               "{} (RLIMIT_NOFILE's hard limit): raise it (ulimit -Hn, LimitNOFILE=) or use larger "
               "segments, or saves will fail once that many are open",
               dir_, wanted, limit);
  }
}

Status Store::open_drives_and_probe(const StoreConfig& config,
                                    std::span<const std::string> others) {
  // The home's lock guards every drive: the other directories are this store's alone.
  KVTIER_ASSIGN_OR_RETURN(DriveSet set, open_drives(*fs_, dir_, others, read_only_, *log_));
  drives_ = std::move(set.drives);
  store_id_ = std::move(set.store_id);
  unreachable_ = std::move(set.unreachable);
  // A drive remounted read-only (or one we may not write) is still read: its records are served,
  // and new segments go to the others. The home is another matter: it holds the index, so the
  // whole store is then read-only (lock_directory).
  for (size_t i = 1; i < drives_.size(); ++i) {
    Drive& d = drives_[i];
    if (!d.available) continue;
    const Status writable = fs_->check_writable(d.dir);
    if (writable.ok() || !may_not_write(writable.native_error())) continue;
    d.unwritable = fmt::format(
        "{} is read-only ({}): its records are served, new segments go to "
        "the other drives",
        d.dir, std::strerror(writable.native_error()));
    KVTIER_LOG(*log_, kWarn, "{}", d.unwritable);
  }
  if (!config.try_direct_io) return {};
  // One O_DIRECT choice for the store: a drive that refuses it makes the whole store buffered.
  direct_ = true;
  for (const Drive& d : drives_) {
    if (!direct_ || !d.available) continue;
    const bool home = &d == &drives_[0];
    if (!read_only_ && !home && d.unwritable.empty()) {
      for (const char* name : {".direct-io-probe", "DRIVE.json.tmp"}) {
        static_cast<void>(fs_->remove(fmt::format("{}/{}", d.dir, name)));
      }
    }
    if (read_only_) {
      direct_ = !home || probe_direct_read(*fs_, d.dir, direct_fallback_);
    } else if (d.unwritable.empty()) {
      direct_ = probe_direct_io(*fs_, d.dir, direct_fallback_);
    } else if (auto ids = list_segments(d.dir, *fs_); ids && !ids->empty()) {
      // Nothing may be written there: an O_DIRECT read of a segment instead.
      direct_ = probe_direct_read(*fs_, d.dir, direct_fallback_);
    }
  }
  if (!direct_) KVTIER_LOG(*log_, kWarn, "falling back to buffered I/O: {}", direct_fallback_);
  return {};
}

Status Store::list_all_segments(std::vector<std::pair<uint32_t, uint32_t>>& found) const {
  std::unordered_map<uint32_t, uint32_t> where;
  for (uint32_t d = 0; d < drives_.size(); ++d) {
    if (!drives_[d].available) continue;
    KVTIER_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, list_segments(drives_[d].dir, *fs_));
    for (uint32_t id : ids) {
      if (auto [it, fresh] = where.emplace(id, d); !fresh) {
        return {ErrorCode::kCorrupt, fmt::format("segment {} is on two drives, {} and {}", id,
                                                 drives_[it->second].dir, drives_[d].dir)};
      }
      found.emplace_back(id, d);
    }
  }
  std::sort(found.begin(), found.end());
  return {};
}

std::string Store::write_problem() const {
  for (const char* name :
       {"", kLockName, kManifestName, IndexLog::kJournalName, IndexLog::kCheckpointName}) {
    const std::string path = *name == 0 ? dir_ : fmt::format("{}/{}", dir_, name);
    const Status writable = fs_->check_writable(path);
    if (!writable.ok() && may_not_write(writable.native_error())) {
      return fmt::format("{} is not writable ({})", path, std::strerror(writable.native_error()));
    }
  }
  return {};
}

Status Store::lock_directory() {
  const std::string path = fmt::format("{}/{}", dir_, kLockName);
  std::string problem = write_problem();
  if (problem.empty()) {
    auto fd = fs_->open(path, O_RDWR | O_CREAT);
    if (fd) {
      lock_file_ = std::move(*fd);
      return lock_exclusive(path);
    }
    if (!may_not_write(fd.error().native_error())) return fd.error();
    problem = fd.error().message() + " (" + std::strerror(fd.error().native_error()) + ")";
  }
  return lock_shared(path, std::move(problem));
}

// Readers hold LOCK_SH, the writer LOCK_EX: a writer waits for readers to close, and readers for
// the writer, so a reader never sees the index change under it.
Status Store::lock_shared(const std::string& path, std::string reason) {
  auto fd = fs_->open(path, O_RDONLY);
  if (!fd) {
    return fd.error().with_context(
        fmt::format("store {} may not be written ({}) and its lock cannot be read", dir_, reason));
  }
  lock_file_ = std::move(*fd);
  if (Status locked = lock_file_->try_lock(LockMode::kShared); !locked.ok()) {
    if (locked.native_error() != EWOULDBLOCK) return locked;
    auto holder = read_file(*fs_, path);
    return {ErrorCode::kLocked,
            fmt::format("store {} is in use by a kvtier engine that writes it{}; a read-only open "
                        "waits until it closes",
                        dir_, holder && !holder->empty() ? fmt::format(" (pid {})", *holder) : "")};
  }
  read_only_ = true;
  read_only_reason_ = std::move(reason);
  KVTIER_LOG(*log_, kWarn, "store opened read-only: {}", read_only_reason_);
  return {};
}

Status Store::lock_exclusive(const std::string& path) {
  if (Status locked = lock_file_->try_lock(LockMode::kExclusive); !locked.ok()) {
    if (locked.native_error() != EWOULDBLOCK) return locked;
    // Only readers hold it when a shared lock can still be had.
    if (lock_file_->try_lock(LockMode::kShared).ok()) {
      lock_file_->unlock();
      return {ErrorCode::kLocked,
              fmt::format("store {} is open read-only by another process; a writer waits until "
                          "every reader has closed it",
                          dir_)};
    }
    auto holder = read_file(*fs_, path);
    std::string who = holder && !holder->empty() ? fmt::format(" (held by pid {})", *holder) : "";
    return {ErrorCode::kLocked,
            fmt::format("store {} is in use by another kvtier engine{}; each TP rank's store "
                        "takes one writer",
                        dir_, who)};
  }
  std::string pid = std::to_string(::getpid());
  KVTIER_TRY(lock_file_->truncate(0));
  return lock_file_->write_at(std::as_bytes(std::span(pid)), 0);
}

Status Store::load_or_create_manifest(const StoreConfig& config, const StoreRequest& request) {
  std::string path = fmt::format("{}/{}", dir_, kManifestName);
  auto text = read_file(*fs_, path);
  if (!text && text.error().code() != ErrorCode::kNotFound) return text.error();
  if (!text && read_only_) {
    return {ErrorCode::kNotFound,
            fmt::format("no store at {} ({} missing), and none can be made there: {}", dir_,
                        kManifestName, read_only_reason_)};
  }
  if (!text) {
    KVTIER_ASSIGN_OR_RETURN(auto existing, list_segments(dir_, *fs_));
    if (!existing.empty()) {
      return {ErrorCode::kCorrupt,
              fmt::format("{} holds segment files but no {}", dir_, kManifestName)};
    }
    segment_bytes_ = config.segment_bytes;
    KVTIER_TRY(size_index_files());  // before anything is written for a store that cannot be
    return write_manifest();
  }
  KVTIER_ASSIGN_OR_RETURN(Manifest manifest, parse_manifest(*text));
  if (!(manifest.geometry == geometry_)) {
    return {ErrorCode::kGeometryMismatch,
            fmt::format("store {} was created for {}, not {}", dir_, manifest.geometry.describe(),
                        geometry_.describe())};
  }
  segment_bytes_ = manifest.segment_bytes;
  // Records sit at offsets within their segment file, so a store cannot change its segment size;
  // taking the store's over an explicit request would ignore what the user said without a word.
  if (request.segment_bytes && *request.segment_bytes != segment_bytes_) {
    return {
        ErrorCode::kInvalidArgument,
        fmt::format("store {} was created with {}-byte segments, not the {} bytes {} asks for; "
                    "a store keeps its segment size (leave it unset to use the store's)",
                    dir_, segment_bytes_, *request.segment_bytes, request.segment_bytes_source)};
  }
  if (segment_bytes_ == 0 || segment_bytes_ % kBlock != 0) {
    return {ErrorCode::kCorrupt,
            fmt::format("{}: segment size {} is not a multiple of 4 KiB", path, segment_bytes_)};
  }
  if (!manifest.capacity_bytes) {
    // An older manifest: the capacity this open resolved is the store's, as it was then; the
    // manifest learns it at the first save.
    KVTIER_TRY(size_index_files());
    return request_capacity(capacity_, "this open (the manifest held none)");
  }
  capacity_ = *manifest.capacity_bytes;
  KVTIER_TRY(size_index_files());
  if (!request.capacity_bytes || *request.capacity_bytes == capacity_) return {};
  return request_capacity(*request.capacity_bytes, request.capacity_bytes_source);
}

Status Store::write_manifest() const {
  std::string image = manifest_json(geometry_, segment_bytes_, capacity_).dump(2) + "\n";
  return write_file_atomic(*fs_, dir_, kManifestName, std::as_bytes(std::span(image)));
}

Status Store::request_capacity(uint64_t requested, const std::string& source) {
  // Checked now, so that a capacity too small for one segment fails at open, not at a save.
  const uint64_t current = std::exchange(capacity_, requested);
  Status usable = size_index_files();
  capacity_ = current;
  KVTIER_TRY(usable);
  KVTIER_TRY(size_index_files());
  if (read_only_) return {};
  pending_capacity_ = requested;
  pending_capacity_source_ = source;
  if (requested != capacity_) {
    KVTIER_LOG(*log_, kWarn,
               "store {}: capacity {} bytes, not the {} bytes {} asks for: it becomes {} bytes at "
               "this engine's first save (and stays so)",
               dir_, capacity_, requested, source, requested);
  }
  return {};
}

Status Store::apply_pending_capacity_locked() {
  if (!pending_capacity_) return {};
  const uint64_t was = std::exchange(capacity_, *pending_capacity_);
  Status st = size_index_files();
  if (st.ok()) st = write_manifest();
  if (!st.ok()) {  // the store keeps the capacity its manifest holds; the next save tries again
    capacity_ = was;
    static_cast<void>(size_index_files());
    return st;
  }
  pending_capacity_.reset();
  if (was != capacity_) {
    KVTIER_LOG(*log_, kWarn, "store {}: capacity changed from {} to {} bytes ({})", dir_, was,
               capacity_, pending_capacity_source_);
  }
  return {};
}

Status Store::size_index_files() {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  // The rank directory takes what it takes now or what its entries may need, whichever is more
  // (ext4 fits about 170 of its names in a block; 100 are counted, plus an htree index block). The
  // root may be shared by other ranks or not be kvtier's at all: one block is counted for it.
  KVTIER_ASSIGN_OR_RETURN(FileInfo dir, fs_->stat(dir_));
  const uint64_t dir_now = dir.allocated;
  const uint64_t names = capacity_ / segment_bytes_ + 8;
  const uint64_t dir_need = kBlock * (1 + names / 100 + (names >= 100 ? 1 : 0));
  // LOCK, MANIFEST.json, and either the manifest's temporary file (at creation) or the O_DIRECT
  // probe (at open): small files of a block each.
  fixed_bytes_ = 3 * kBlock + std::max(dir_now, dir_need) + kBlock;
  // The journal's budget is at least a thousandth of the capacity, between 64 KiB and 4 MiB.
  journal_floor_ = std::clamp<uint64_t>(capacity_ / 1024 / kBlock * kBlock, 64 * 1024, 4 * kMiB);
  segment_estimate_ = expected_disk_bytes(segment_bytes_);
  const uint64_t least = segment_estimate_ + index_bytes_locked(0, 1);
  if (least > capacity_) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("store {}: a capacity of {} cannot hold one {} segment and the "
                        "store's index files; it needs at least {}",
                        dir_, size_text(capacity_), size_text(segment_bytes_), size_text(least))};
  }
  return {};
}

void Store::remove_stale_files() const {
  // Temporary files a crash left: they would only take room the capacity does not count.
  for (const char* name : {"index.ckpt.tmp", "MANIFEST.json.tmp", ".direct-io-probe"}) {
    static_cast<void>(fs_->remove(fmt::format("{}/{}", dir_, name)));
  }
}

Status Store::load_index() {
  KVTIER_ASSIGN_OR_RETURN(LoadedIndex loaded, IndexLog::load(dir_, *fs_));
  if (auto checkpoint = fs_->stat(fmt::format("{}/{}", dir_, IndexLog::kCheckpointName))) {
    checkpoint_disk_ = checkpoint->allocated;
  }
  std::vector<std::pair<uint32_t, uint32_t>> ids;  // (segment, drive), ascending
  KVTIER_TRY(list_all_segments(ids));
  // Every store has a checkpoint and a journal from its first open on: segment files without both
  // mean the index was lost (deleted, or a crash before the first checkpoint). Trusting what is
  // left would forget the records the missing file held, and delete their segments as empty.
  if (!loaded.needs_rebuild && !(loaded.checkpoint_found && loaded.journal_found) && !ids.empty()) {
    loaded.needs_rebuild = true;
    loaded.problem = fmt::format("index {} missing beside {} segment file(s)",
                                 loaded.checkpoint_found ? "journal" : "checkpoint", ids.size());
  }
  if (loaded.needs_rebuild) {
    // Rebuilt without a drive, the index would forget every record that drive holds.
    for (const Drive& d : drives_) {
      if (d.available) continue;
      return {ErrorCode::kNotFound,
              fmt::format(
                  "{}: {}, and the index must be rebuilt from segment headers, which needs every "
                  "drive: {}",
                  dir_, loaded.problem, d.problem)};
    }
    KVTIER_LOG(*log_, kWarn, "{}: {}; rebuilding the index from segment headers", dir_,
               loaded.problem);
    loaded.records.clear();
    for (auto [id, drive] : ids) {
      KVTIER_ASSIGN_OR_RETURN(auto seg,
                              open_segment(*fs_, drives_[drive].dir, id, direct_, read_only_));
      KVTIER_ASSIGN_OR_RETURN(auto found, scan_segment(*seg, geometry_));
      loaded.records.insert(loaded.records.end(), found.begin(), found.end());
    }
  }
  // A torn tail is cut now; a damaged journal is kept whole until the checkpoint below replaces it,
  // so a crash in between rebuilds again instead of losing what the damaged part held. A read-only
  // store keeps both as they are and has no journal to append to.
  if (!read_only_) {
    auto journal = IndexLog::open(
        dir_, loaded.needs_rebuild ? loaded.journal_file_bytes : loaded.journal_valid_bytes, *fs_);
    if (!journal) return journal.error();
    journal_.emplace(std::move(*journal));
  }
  std::lock_guard lock(mu_);
  // Above every id the index names too: a segment whose drop is still in the journal may be gone
  // from disk, and a new segment under its id would lose its records when that drop is replayed.
  next_id_ = std::max(ids.empty() ? 0 : ids.back().first, loaded.max_segment_id) + 1;
  KVTIER_TRY(open_segments_locked(ids));
  KVTIER_TRY(
      adopt_records(std::move(loaded.records), loaded.dropped_segments, loaded.segment_uses));
  if (read_only_) {
    if (used_locked(0) > capacity_) {
      KVTIER_LOG(*log_, kWarn, "{}: over its capacity of {} bytes; a read-only open evicts nothing",
                 dir_, capacity_);
    }
    return {};
  }
  // A journal past its budget (kept by an older build, or under a larger capacity) is compacted.
  bool changed = loaded.needs_rebuild || dropped_at_open_ > 0 || !loaded.checkpoint_found ||
                 journal_->journal_bytes() > journal_budget_locked();
  KVTIER_TRY(enforce_capacity_locked(0));
  if (changed) KVTIER_TRY(checkpoint_locked());
  return {};
}

Status Store::open_segments_locked(std::span<const std::pair<uint32_t, uint32_t>> ids) {
  for (auto [id, drive] : ids) {
    Drive& d = drives_[drive];
    const bool writable = !read_only_ && d.unwritable.empty();
    auto opened = open_segment(*fs_, d.dir, id, direct_, !writable);
    if (!opened && writable && drive != 0 && may_not_write(opened.error().native_error())) {
      // A segment file that may not be written (its mode or attributes, a read-only mount under
      // the drive's directory): read, and its drive takes no new segments.
      d.unwritable = fmt::format(
          "{}: {} ({}): its records are served, new segments go to the other "
          "drives",
          d.dir, opened.error().message(), std::strerror(opened.error().native_error()));
      KVTIER_LOG(*log_, kWarn, "{}", d.unwritable);
      opened = open_segment(*fs_, d.dir, id, direct_, /*read_only=*/true);
    }
    KVTIER_ASSIGN_OR_RETURN(auto file, std::move(opened));
    file->drive = drive;
    Segment& seg = segments_[id];
    seg.drive = drive;
    seg.file = std::move(file);
    KVTIER_ASSIGN_OR_RETURN(FileInfo info, seg.file->file->stat());
    seg.disk_bytes = info.allocated;
    segment_estimate_ = std::max(segment_estimate_, seg.disk_bytes);
  }
  return {};
}

Status Store::adopt_records(std::vector<RecordMeta> records, std::span<const uint32_t> dropped,
                            const std::unordered_map<uint32_t, uint64_t>& uses) {
  std::set<uint32_t> dropped_ids(dropped.begin(), dropped.end());
  // Oldest first, so a key stored twice keeps its newest copy.
  std::sort(records.begin(), records.end(),
            [](const RecordMeta& a, const RecordMeta& b) { return a.sequence < b.sequence; });
  const bool drive_missing =
      std::any_of(drives_.begin(), drives_.end(), [](const Drive& d) { return !d.available; });
  for (const RecordMeta& m : records) {
    auto it = segments_.find(m.segment);
    // With a drive missing, a segment not found may be on it: kept, a miss until the drive is back.
    if (it == segments_.end() && drive_missing && !dropped_ids.contains(m.segment)) {
      if (auto old = index_.find(m.key); old != index_.end()) index_remove_locked(old->second);
      offline_[m.key] = m;
      sequence_ = std::max(sequence_, m.sequence);
      continue;
    }
    bool ok = it != segments_.end() && !dropped_ids.contains(m.segment) && m.offset % kBlock == 0 &&
              m.end() <= it->second.file->size && m.token_count > 0 &&
              m.token_count <= geometry_.chunk_tokens &&
              m.payload_bytes == geometry_.bytes_for_tokens(m.token_count);
    if (!ok) {
      ++dropped_at_open_;
      KVTIER_LOG(*log_, kWarn,
                 "{}: index entry for segment {} offset {} has no intact file; dropped", dir_,
                 m.segment, m.offset);
      continue;
    }
    if (auto old = index_.find(m.key); old != index_.end()) index_remove_locked(old->second);
    index_add_locked(m);
    sequence_ = std::max(sequence_, m.sequence);
  }
  recovered_records_ = index_.size();
  if (!offline_.empty()) {
    KVTIER_LOG(*log_, kWarn,
               "{}: {} record(s) on segments of missing drives are misses until they are back",
               dir_, offline_.size());
  }
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (it->second.records > 0) {
      ++it;
      continue;
    }
    // An empty file is an unused active segment or one whose drop was journaled before a crash.
    if (!read_only_) static_cast<void>(fs_->remove(it->second.file->path));
    it = segments_.erase(it);
  }
  // A segment was last used at its newest record's write or its last recorded use, whichever came
  // later (index_add_locked took the first); a rebuilt index has no uses and falls back to writes.
  uint32_t newest = 0;
  for (auto& [id, seg] : segments_) {
    if (auto it = uses.find(id); it != uses.end()) {
      seg.last_use = std::max(seg.last_use, it->second);
    }
    seg.saved_use = seg.last_use;
    sequence_ = std::max(sequence_, seg.last_use);
    // Appends go on only where they may be written.
    if (drives_[seg.drive].takes_new_segments()) newest = std::max(newest, id);
  }
  active_ = newest;
  return {};
}

}  // namespace kvtier
