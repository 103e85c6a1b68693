// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Store::open: its directories found and locked, the manifest read or written, the capacity
// budget sized, the drives opened and probed (the index is loaded by store_recovery.cpp).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/posix.hpp"
#include "store/store.hpp"

namespace kvtier {
namespace {

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
        config.dir_name.empty()
            ? fmt::format("{}/rank{}of{}", root, config.geometry.tp_rank, config.geometry.tp_world)
            : fmt::format("{}/{}", root, config.dir_name));
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

std::string stamp(const IndexFiles& f) {
  auto one = [](const FileState& s) {
    return fmt::format("{}:{}:{}:{}.{}", s.exists, s.ino, s.size, s.mtime.tv_sec, s.mtime.tv_nsec);
  };
  return one(f.checkpoint) + "/" + one(f.journal);
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
    const IndexFiles after = index_files(*config.fs, dir);
    const bool settled = after.continues(before);
    if (settled || attempt == kSnapshotAttempts) {
      if (!settled) {
        return fail(ErrorCode::kLocked,
                    fmt::format("store {}: its writer changed the index under each of {} reads of "
                                "it",
                                dir, kSnapshotAttempts));
      }
      // A journal that grew while it was read may hold more than was read: the earlier stamp.
      if (store) (*store)->index_stamp_ = stamp(before);
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
  store->shape_ = RecordShape{config.geometry, config.record_version, config.record_kind};
  store->dir_depth_ = config.dir_depth();
  store->index_ = RecordIndex(config.geometry.chunk_tokens);
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
  KVTIER_TRY(make_dirs_durable(fs, store->dir_, config.dir_depth()));
  KVTIER_ASSIGN_OR_RETURN(store->directory_,
                          StoreDirectory::open(fs, store->dir_, config.read_only, log));
  KVTIER_TRY(store->load_or_create_manifest(config, request));
  if (!store->read_only()) store->directory_.remove_stale_files();
  KVTIER_TRY(store->open_drives_and_probe(config, others));
  store->make_room_for_open_files();
  KVTIER_TRY(store->load_index());
  return store;
}

void Store::make_room_for_open_files() const {
  // Every segment stays open (its descriptor is what reads and cuFile's handles use): a full store
  // on large drives holds thousands, past the 1024 many systems give a process by default.
  constexpr uint64_t kBesideSegments = 256;  // the index files, sockets, the I/O engines, CUDA
  const uint64_t wanted =
      drives_.size() * (budget_.capacity() / budget_.segment_bytes() + 8) + kBesideSegments;
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
  KVTIER_ASSIGN_OR_RETURN(DriveSet set,
                          open_drives(*fs_, config.dir_depth(), dir_, others, read_only(), *log_));
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
    if (writable.ok() || !write_refused(writable.native_error())) continue;
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
    if (!read_only() && !home && d.unwritable.empty()) {
      for (const char* name : {".direct-io-probe", "DRIVE.json.tmp"}) {
        static_cast<void>(fs_->remove(fmt::format("{}/{}", d.dir, name)));
      }
    }
    if (read_only()) {
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

Status Store::load_or_create_manifest(const StoreConfig& config, const StoreRequest& request) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<Manifest> manifest, directory_.read_manifest());
  if (!manifest && read_only()) {
    return {ErrorCode::kNotFound,
            fmt::format("no store at {} ({} missing), and none can be made there: {}", dir_,
                        StoreDirectory::kManifestName, read_only_reason())};
  }
  if (!manifest) {
    KVTIER_ASSIGN_OR_RETURN(auto existing, list_segments(dir_, *fs_));
    if (!existing.empty()) {
      return {ErrorCode::kCorrupt,
              fmt::format("{} holds segment files but no {}", dir_, StoreDirectory::kManifestName)};
    }
    // Sized before anything is written, for a store that cannot be.
    KVTIER_TRY(resize_budget(config.capacity_bytes, config.segment_bytes));
    return write_manifest();
  }
  if (manifest->format_version != shape_.version) {
    return {ErrorCode::kFormatVersion, fmt::format("store {} is of format {}, not the {} asked for",
                                                   dir_, manifest->format_version, shape_.version)};
  }
  if (!(manifest->geometry == shape_.geometry)) {
    return {ErrorCode::kGeometryMismatch,
            fmt::format("store {} was created for {}, not {}", dir_, manifest->geometry.describe(),
                        shape_.geometry.describe())};
  }
  const uint64_t segment_bytes = manifest->segment_bytes;
  // Records sit at offsets within their segment file, so a store cannot change its segment size;
  // taking the store's over an explicit request would ignore what the user said without a word.
  if (request.segment_bytes && *request.segment_bytes != segment_bytes) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("store {} was created with {}-byte segments, not the {} bytes {} asks for; "
                        "a store keeps its segment size (leave it unset to use the store's)",
                        dir_, segment_bytes, *request.segment_bytes, request.segment_bytes_source)};
  }
  if (segment_bytes == 0 || segment_bytes % kBlock != 0) {
    return {ErrorCode::kCorrupt, fmt::format("{}/{}: segment size {} is not a multiple of 4 KiB",
                                             dir_, StoreDirectory::kManifestName, segment_bytes)};
  }
  if (!manifest->capacity_bytes) {
    // An older manifest: the capacity this open resolved is the store's, as it was then; the
    // manifest learns it at the first save.
    KVTIER_TRY(resize_budget(config.capacity_bytes, segment_bytes));
    return request_capacity(config.capacity_bytes, "this open (the manifest held none)");
  }
  KVTIER_TRY(resize_budget(*manifest->capacity_bytes, segment_bytes));
  if (!request.capacity_bytes || *request.capacity_bytes == budget_.capacity()) return {};
  return request_capacity(*request.capacity_bytes, request.capacity_bytes_source);
}

Status Store::write_manifest() const {
  return directory_.write_manifest(
      {shape_.geometry, shape_.version, budget_.segment_bytes(), budget_.capacity()});
}

Status Store::request_capacity(uint64_t requested, const std::string& source) {
  // Checked now, so that a capacity too small for one segment fails at open, not at a save.
  CapacityBudget trial = budget_;
  KVTIER_ASSIGN_OR_RETURN(FileInfo dir, fs_->stat(dir_));
  KVTIER_TRY(trial.resize(requested, budget_.segment_bytes(), dir.allocated, 0, dir_));
  if (read_only()) return {};
  pending_capacity_ = requested;
  pending_capacity_source_ = source;
  if (requested != budget_.capacity()) {
    KVTIER_LOG(*log_, kWarn,
               "store {}: capacity {} bytes, not the {} bytes {} asks for: it becomes {} bytes at "
               "this engine's first save (and stays so)",
               dir_, budget_.capacity(), requested, source, requested);
  }
  return {};
}

Status Store::apply_pending_capacity_locked() {
  if (!pending_capacity_) return {};
  const CapacityBudget was = budget_;
  KVTIER_TRY(resize_budget(*pending_capacity_, budget_.segment_bytes()));
  if (Status st = write_manifest(); !st.ok()) {
    budget_ = was;  // the store keeps the capacity its manifest holds; the next save tries again
    return st;
  }
  pending_capacity_.reset();
  if (was.capacity() != budget_.capacity()) {
    KVTIER_LOG(*log_, kWarn, "store {}: capacity changed from {} to {} bytes ({})", dir_,
               was.capacity(), budget_.capacity(), pending_capacity_source_);
  }
  return {};
}

Status Store::resize_budget(uint64_t capacity, uint64_t segment_bytes) {
  KVTIER_ASSIGN_OR_RETURN(FileInfo dir, fs_->stat(dir_));
  return budget_.resize(capacity, segment_bytes, dir.allocated,
                        journal_ ? journal_->journal_bytes() : 0, dir_);
}

bool Store::index_changed() const { return stamp(index_files(*fs_, dir_)) != index_stamp_; }

}  // namespace kvtier
