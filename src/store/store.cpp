// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/try.hpp"

namespace kvtier {
namespace {

constexpr const char* kManifestName = "MANIFEST.json";
constexpr const char* kLockName = "LOCK";
// Uses are recorded in the journal along with the next write, at close, or by a lookup once the
// oldest unrecorded one is this old: at most one extra journal sync per interval for readers.
constexpr auto kUseFlushInterval = std::chrono::seconds(10);

// KV is user data: a directory kvtier makes is 0700 whatever the umask (mkdir's mode passes through
// it, so it is set again). One that exists keeps the mode its owner gave it.
Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0) {
    if (::chmod(path.c_str(), 0700) != 0) return posix_error(errno, "chmod " + path);
    return {};
  }
  if (errno == EEXIST) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) return posix_error(errno, "stat " + path);
    if (!S_ISDIR(st.st_mode)) {
      return {ErrorCode::kInvalidArgument, fmt::format("{} exists and is not a directory", path)};
    }
    return {};
  }
  return posix_error(errno, "creating directory " + path);
}

nlohmann::json manifest_json(const KvGeometry& g, uint64_t segment_bytes) {
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
          {"segment_bytes", segment_bytes}};
}

Result<std::pair<KvGeometry, uint64_t>> parse_manifest(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != "kvtier-store") return fail(ErrorCode::kCorrupt, "MANIFEST.json: not a kvtier store");
    if (j.at("format_version").get<uint32_t>() != kFormatVersion) {
      return fail(ErrorCode::kFormatVersion,
                  fmt::format("store format version {} (this build reads {})",
                              j.at("format_version").get<uint32_t>(), kFormatVersion));
    }
    KvGeometry g{j.at("model_id"), j.at("layers"),        j.at("kv_heads"), j.at("head_dim"),
                 j.at("element_bytes"), j.at("chunk_tokens"), j.at("tp_rank"), j.at("tp_world")};
    return std::pair{g, j.at("segment_bytes").get<uint64_t>()};
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kCorrupt, fmt::format("MANIFEST.json unreadable: {}", e.what()));
  }
}

}  // namespace

Store::~Store() {
  if (!journal_) return;
  std::lock_guard lock(mu_);
  Status st = append_locked({});
  if (!st.ok()) KVTIER_LOG(*log_, kWarn, "{}: recording segment uses at close: {}", dir_, st.to_string());
}

Result<std::unique_ptr<Store>> Store::open(const Options& options, const Logger& log,
                                           const StoreRequest& request) {
  std::unique_ptr<Store> store(new Store());
  store->log_ = &log;
  store->geometry_ = options.geometry;
  store->capacity_ = options.capacity_bytes;
  store->dir_ = fmt::format("{}/rank{}of{}", options.root, options.geometry.tp_rank,
                            options.geometry.tp_world);
  struct stat st{};
  if (!options.create_if_missing && ::stat(store->dir_.c_str(), &st) != 0) {
    // Only ENOENT means there is no store; EACCES on a directory we may not search is a store we
    // may not read, and saying "not found" would send the user looking in the wrong place.
    if (errno == ENOENT) return fail(ErrorCode::kNotFound, fmt::format("no store at {}", store->dir_));
    return fail(posix_error(errno, fmt::format("cannot reach the store at {}", store->dir_)));
  }
  KVTIER_TRY(make_dir(options.root));
  KVTIER_TRY(make_dir(store->dir_));
  KVTIER_TRY(store->lock_directory());
  KVTIER_TRY(store->load_or_create_manifest(options, request));
  if (options.io_path != IoPath::kBuffered) {
    store->direct_ = probe_direct_io(store->dir_, store->direct_fallback_);
    if (!store->direct_) KVTIER_LOG(log, kWarn, "falling back to buffered I/O: {}", store->direct_fallback_);
  }
  KVTIER_TRY(store->load_index());
  return store;
}

Status Store::lock_directory() {
  std::string path = fmt::format("{}/{}", dir_, kLockName);
  KVTIER_ASSIGN_OR_RETURN(lock_fd_, open_file(path, O_RDWR | O_CREAT));
  if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    auto holder = read_file(path);
    std::string who = holder && !holder->empty() ? fmt::format(" (held by pid {})", *holder) : "";
    if (err == EWOULDBLOCK) {
      return {ErrorCode::kLocked,
              fmt::format("store {} is in use by another kvtier engine{}; each TP rank's store "
                          "takes one writer", dir_, who)};
    }
    return posix_error(err, "locking " + path);
  }
  std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd_.get(), 0) != 0) return posix_error(errno, "truncating " + path);
  return pwrite_full(lock_fd_.get(), std::as_bytes(std::span(pid)), 0);
}

Status Store::load_or_create_manifest(const Options& options, const StoreRequest& request) {
  std::string path = fmt::format("{}/{}", dir_, kManifestName);
  auto text = read_file(path);
  if (!text && text.error().code() != ErrorCode::kNotFound) return text.error();
  if (!text) {
    KVTIER_ASSIGN_OR_RETURN(auto existing, list_segments(dir_));
    if (!existing.empty()) {
      return {ErrorCode::kCorrupt,
              fmt::format("{} holds segment files but no {}", dir_, kManifestName)};
    }
    segment_bytes_ = options.segment_bytes;
    std::string image = manifest_json(geometry_, segment_bytes_).dump(2) + "\n";
    return write_file_atomic(dir_, kManifestName, std::as_bytes(std::span(image)));
  }
  KVTIER_ASSIGN_OR_RETURN(auto parsed, parse_manifest(*text));
  if (!(parsed.first == geometry_)) {
    return {ErrorCode::kGeometryMismatch,
            fmt::format("store {} was created for {}, not {}", dir_, parsed.first.describe(),
                        geometry_.describe())};
  }
  segment_bytes_ = parsed.second;
  // Records sit at offsets within their segment file, so a store cannot change its segment size;
  // taking the store's over an explicit request would ignore what the user said without a word.
  if (request.segment_bytes && *request.segment_bytes != segment_bytes_) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("store {} was created with {}-byte segments, not the {} bytes {} asks for; "
                        "a store keeps its segment size (leave it unset to use the store's)",
                        dir_, segment_bytes_, *request.segment_bytes, request.segment_bytes_source)};
  }
  if (segment_bytes_ == 0 || segment_bytes_ % kBlock != 0 || segment_bytes_ > capacity_) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("store {} uses {}-byte segments, which a capacity of {} bytes cannot hold",
                        dir_, segment_bytes_, capacity_)};
  }
  return {};
}

Status Store::load_index() {
  KVTIER_ASSIGN_OR_RETURN(LoadedIndex loaded, IndexLog::load(dir_));
  KVTIER_ASSIGN_OR_RETURN(std::vector<uint32_t> ids, list_segments(dir_));
  // Every store has a checkpoint and a journal from its first open on: segment files without both
  // mean the index was lost (deleted, or a crash before the first checkpoint). Trusting what is
  // left would forget the records the missing file held, and delete their segments as empty.
  if (!loaded.needs_rebuild && !(loaded.checkpoint_found && loaded.journal_found) && !ids.empty()) {
    loaded.needs_rebuild = true;
    loaded.problem = fmt::format("index {} missing beside {} segment file(s)",
                                 loaded.checkpoint_found ? "journal" : "checkpoint", ids.size());
  }
  if (loaded.needs_rebuild) {
    KVTIER_LOG(*log_, kWarn, "{}: {}; rebuilding the index from segment headers", dir_, loaded.problem);
    loaded.records.clear();
    for (uint32_t id : ids) {
      KVTIER_ASSIGN_OR_RETURN(auto seg, open_segment(dir_, id, direct_));
      KVTIER_ASSIGN_OR_RETURN(auto found, scan_segment(*seg, geometry_));
      loaded.records.insert(loaded.records.end(), found.begin(), found.end());
    }
  }
  // A torn tail is cut now; a damaged journal is kept whole until the checkpoint below replaces it,
  // so a crash in between rebuilds again instead of losing what the damaged part held.
  auto journal = IndexLog::open(
      dir_, loaded.needs_rebuild ? loaded.journal_file_bytes : loaded.journal_valid_bytes);
  if (!journal) return journal.error();
  journal_.emplace(std::move(*journal));
  std::lock_guard lock(mu_);
  // Above every id the index names too: a segment whose drop is still in the journal may be gone
  // from disk, and a new segment under its id would lose its records when that drop is replayed.
  next_id_ = std::max(ids.empty() ? 0 : ids.back(), loaded.max_segment_id) + 1;
  for (uint32_t id : ids) {
    auto seg = open_segment(dir_, id, direct_);
    if (!seg) return seg.error();
    segments_[id].file = std::move(*seg);
  }
  KVTIER_TRY(adopt_records(std::move(loaded.records), loaded.dropped_segments, loaded.segment_uses));
  bool changed = loaded.needs_rebuild || dropped_at_open_ > 0 || !loaded.checkpoint_found;
  KVTIER_TRY(enforce_capacity_locked(0));
  if (changed) KVTIER_TRY(checkpoint_locked());
  return {};
}

Status Store::adopt_records(std::vector<RecordMeta> records, std::span<const uint32_t> dropped,
                            const std::unordered_map<uint32_t, uint64_t>& uses) {
  std::set<uint32_t> dropped_ids(dropped.begin(), dropped.end());
  // Oldest first, so a key stored twice keeps its newest copy.
  std::sort(records.begin(), records.end(),
            [](const RecordMeta& a, const RecordMeta& b) { return a.sequence < b.sequence; });
  for (const RecordMeta& m : records) {
    auto it = segments_.find(m.segment);
    bool ok = it != segments_.end() && !dropped_ids.contains(m.segment) && m.offset % kBlock == 0 &&
              m.end() <= it->second.file->size && m.token_count > 0 &&
              m.token_count <= geometry_.chunk_tokens &&
              m.payload_bytes == geometry_.bytes_for_tokens(m.token_count);
    if (!ok) {
      ++dropped_at_open_;
      KVTIER_LOG(*log_, kWarn, "{}: index entry for segment {} offset {} has no intact file; dropped",
                 dir_, m.segment, m.offset);
      continue;
    }
    if (auto old = index_.find(m.key); old != index_.end()) index_remove_locked(old->second);
    index_add_locked(m);
    sequence_ = std::max(sequence_, m.sequence);
  }
  recovered_records_ = index_.size();
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (it->second.records > 0) {
      ++it;
      continue;
    }
    // An empty file is an unused active segment or one whose drop was journaled before a crash.
    ::unlink(it->second.file->path.c_str());
    it = segments_.erase(it);
  }
  // A segment was last used at its newest record's write or its last recorded use, whichever came
  // later (index_add_locked took the first); a rebuilt index has no uses and falls back to writes.
  uint32_t newest = 0;
  for (auto& [id, seg] : segments_) {
    if (auto it = uses.find(id); it != uses.end()) seg.last_use = std::max(seg.last_use, it->second);
    seg.saved_use = seg.last_use;
    sequence_ = std::max(sequence_, seg.last_use);
    newest = std::max(newest, id);
  }
  active_ = newest;
  return {};
}

void Store::index_add_locked(const RecordMeta& meta) {
  index_[meta.key] = meta;
  Segment& seg = segments_.at(meta.segment);
  seg.live_bytes += meta.record_bytes();
  seg.records += 1;
  seg.tokens += meta.token_count;
  seg.write_offset = std::max(seg.write_offset, meta.end());
  seg.last_use = std::max(seg.last_use, meta.sequence);
  seg.keys.push_back(meta.key);
  if (meta.token_count < geometry_.chunk_tokens) partials_[meta.parent].push_back(meta.key);
}

void Store::index_remove_locked(const RecordMeta& meta) {
  if (auto it = segments_.find(meta.segment); it != segments_.end()) {
    it->second.live_bytes -= meta.record_bytes();
    it->second.records -= 1;
    it->second.tokens -= meta.token_count;
  }
  if (meta.token_count < geometry_.chunk_tokens) {
    auto it = partials_.find(meta.parent);
    if (it != partials_.end()) {
      std::erase(it->second, meta.key);
      if (it->second.empty()) partials_.erase(it);
    }
  }
  index_.erase(meta.key);
}

std::vector<LocatedRecord> Store::find_chain(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  std::vector<LocatedRecord> out;
  for (const Key128& key : keys) {
    auto it = index_.find(key);
    if (it == index_.end()) break;
    Segment& seg = segments_.at(it->second.segment);
    touch_locked(seg);
    out.push_back({it->second, seg.file});
  }
  return out;
}

std::vector<RecordMeta> Store::partial_children(const Key128& parent) {
  std::lock_guard lock(mu_);
  std::vector<RecordMeta> out;
  if (auto it = partials_.find(parent); it != partials_.end()) {
    for (const Key128& key : it->second) out.push_back(index_.at(key));
  }
  return out;
}

std::optional<LocatedRecord> Store::find(const Key128& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  Segment& seg = segments_.at(it->second.segment);
  touch_locked(seg);
  return LocatedRecord{it->second, seg.file};
}

bool Store::contains(const Key128& key) {
  std::lock_guard lock(mu_);
  return index_.contains(key);
}

Status Store::enforce_capacity_locked(uint64_t reserve_segments) {
  while ((segments_.size() + reserve_segments) * segment_bytes_ > capacity_) {
    const Segment* victim = nullptr;
    for (const auto& [id, seg] : segments_) {
      if (seg.pins == 0 && (victim == nullptr || seg.last_use < victim->last_use)) victim = &seg;
    }
    if (victim == nullptr) {
      return {ErrorCode::kCapacity,
              fmt::format("store {} is full: {} segments of {} bytes in use by writers, capacity {} "
                          "bytes", dir_, segments_.size(), segment_bytes_, capacity_)};
    }
    KVTIER_TRY(evict_segment_locked(victim->file->id));
  }
  return {};
}

Status Store::evict_segment_locked(uint32_t id) {
  KVTIER_TRY(append_locked({JournalEntry{JournalOp::kDropSegment, {}, id}}));
  Segment& seg = segments_.at(id);
  const uint64_t records = seg.records;
  evicted_records_ += records;
  ++evicted_segments_;
  for (const Key128& key : seg.keys) {
    // A key listed twice (dropped, then stored here again) is found once: the first removal ends it.
    if (auto it = index_.find(key); it != index_.end() && it->second.segment == id) {
      const RecordMeta meta = it->second;
      index_remove_locked(meta);
    }
  }
  // Readers holding the SegmentFile keep reading the unlinked file; its bytes are never reused.
  ::unlink(seg.file->path.c_str());
  segments_.erase(id);
  if (active_ == id) active_ = 0;
  KVTIER_LOG(*log_, kDebug, "{}: evicted segment {} ({} records)", dir_, id, records);
  return {};
}

Result<Store::Segment*> Store::new_segment_locked() {
  KVTIER_TRY(enforce_capacity_locked(1));
  uint32_t id = next_id_++;
  KVTIER_ASSIGN_OR_RETURN(auto file, create_segment(dir_, id, segment_bytes_, direct_));
  Segment& seg = segments_[id];
  seg.file = std::move(file);
  seg.last_use = ++sequence_;
  active_ = id;
  return &seg;
}

Store::PlacementPlan Store::plan_placement_locked(std::span<const uint64_t> sizes) const {
  PlacementPlan plan;
  bool open_segment = active_ != 0;
  uint64_t offset = open_segment ? segments_.at(active_).write_offset : 0;
  for (uint64_t size : sizes) {
    if (!open_segment || offset + size > segment_bytes_) {
      ++plan.new_segments;
      open_segment = true;
      offset = 0;
    } else if (plan.new_segments == 0) {
      plan.uses_active = true;
    }
    offset += size;
  }
  return plan;
}

Status Store::admit_locked(std::span<const uint64_t> sizes) const {
  uint64_t total = 0;
  for (uint64_t size : sizes) {
    if (size > segment_bytes_) {
      return {ErrorCode::kCapacity,
              fmt::format("store {}: a {}-byte record cannot fit in its {}-byte segments", dir_, size,
                          segment_bytes_)};
    }
    total += size;
  }
  const PlacementPlan plan = plan_placement_locked(sizes);
  const uint64_t limit = capacity_ / segment_bytes_;
  const uint64_t own = plan.new_segments + (plan.uses_active ? 1 : 0);
  if (own > limit) {
    return {ErrorCode::kCapacity,
            fmt::format("store {}: a save of {} bytes needs {} segments of {} bytes; capacity {} bytes "
                        "holds {}", dir_, total, own, segment_bytes_, capacity_, limit)};
  }
  // Segments eviction may not take: those other writers have pinned, and the active one when this
  // save appends to it.
  uint64_t kept = 0;
  for (const auto& [id, seg] : segments_) kept += seg.pins > 0 || (id == active_ && plan.uses_active);
  if (kept + plan.new_segments > limit) {
    return {ErrorCode::kCapacity,
            fmt::format("store {} is full: {} segments of {} bytes in use by writers, capacity {} bytes; "
                        "this save needs {} more", dir_, kept, segment_bytes_, capacity_,
                        plan.new_segments)};
  }
  return {};
}

Result<std::vector<Placement>> Store::reserve(std::span<const uint64_t> sizes) {
  std::lock_guard lock(mu_);
  // Decided before anything is evicted: a save that cannot fit must not cost the sessions stored.
  KVTIER_TRY(admit_locked(sizes));
  std::vector<Placement> out;
  out.reserve(sizes.size());
  for (uint64_t size : sizes) {
    Segment* seg = active_ != 0 ? &segments_.at(active_) : nullptr;
    if (seg == nullptr || seg->write_offset + size > segment_bytes_) {
      // The segment being left may be evicted now if it is the least recently used: admission
      // counted it as evictable unless this save (or another writer) has pinned it.
      auto fresh = new_segment_locked();
      if (!fresh) {
        for (const Placement& p : out) --segments_.at(p.file->id).pins;
        return fail(fresh.error());
      }
      seg = *fresh;
    }
    out.push_back({seg->file, seg->write_offset, ++sequence_});
    seg->write_offset += size;
    seg->last_use = sequence_;
    ++seg->pins;
  }
  return out;
}

void Store::abort(std::span<const Placement> placements) {
  std::lock_guard lock(mu_);
  for (const Placement& p : placements) --segments_.at(p.file->id).pins;
}

Status Store::commit(std::span<const RecordMeta> records, std::span<const Placement> placements) {
  std::set<SegmentFile*> synced;
  for (const Placement& p : placements) {
    if (!synced.insert(p.file.get()).second) continue;
    if (::fdatasync(p.file->fd.get()) != 0) {
      Status st = posix_error(errno, "fdatasync " + p.file->path);
      abort(placements);
      return st;
    }
  }
  std::lock_guard lock(mu_);
  std::vector<JournalEntry> entries;
  for (const RecordMeta& m : records) {
    if (!index_.contains(m.key)) entries.push_back({JournalOp::kAdd, m, 0});
  }
  for (const Placement& p : placements) --segments_.at(p.file->id).pins;
  KVTIER_TRY(append_locked(entries));
  for (const JournalEntry& e : entries) {
    index_add_locked(e.meta);
    Segment& seg = segments_.at(e.meta.segment);
    seg.saved_use = std::max(seg.saved_use, e.meta.sequence);  // an add records its write as a use
    sequence_ = std::max(sequence_, e.meta.sequence);
  }
  return maybe_checkpoint_locked();
}

Status Store::drop(std::span<const Key128> keys) {
  std::lock_guard lock(mu_);
  return drop_locked(keys);
}

Status Store::drop_locked(std::span<const Key128> keys) {
  std::vector<JournalEntry> entries;
  for (const Key128& key : keys) {
    if (index_.contains(key)) entries.push_back({JournalOp::kDropRecord, RecordMeta{key}, 0});
  }
  KVTIER_TRY(append_locked(entries));
  std::set<uint32_t> touched;
  for (const JournalEntry& e : entries) {
    const RecordMeta meta = index_.at(e.meta.key);
    touched.insert(meta.segment);
    index_remove_locked(meta);
    ++evicted_records_;
  }
  for (uint32_t id : touched) {
    const Segment& seg = segments_.at(id);
    if (seg.records == 0 && seg.pins == 0 && id != active_) KVTIER_TRY(evict_segment_locked(id));
  }
  return maybe_checkpoint_locked();
}

Status Store::maybe_checkpoint_locked() {
  constexpr uint64_t kMinJournal = uint64_t{4} << 20;
  if (journal_->journal_bytes() < std::max<uint64_t>(kMinJournal, index_.size() * sizeof(RecordMeta))) {
    return {};
  }
  return checkpoint_locked();
}

Status Store::checkpoint_locked() {
  std::vector<SegmentUse> uses;
  uses.reserve(segments_.size());
  for (const auto& [id, seg] : segments_) uses.push_back({id, seg.last_use});
  KVTIER_TRY(journal_->checkpoint(live_records_locked(), uses));
  for (auto& [id, seg] : segments_) seg.saved_use = seg.last_use;
  unsaved_since_.reset();
  return {};
}

Status Store::append_locked(std::vector<JournalEntry> entries) {
  // Uses go first: a drop of the same segment later in the batch must win at replay.
  std::vector<JournalEntry> batch;
  for (const auto& [id, seg] : segments_) {
    if (seg.last_use > seg.saved_use) batch.push_back({JournalOp::kUse, {}, id, seg.last_use});
  }
  const size_t uses = batch.size();
  batch.insert(batch.end(), entries.begin(), entries.end());
  KVTIER_TRY(journal_->append(batch));
  for (size_t i = 0; i < uses; ++i) {
    if (auto it = segments_.find(batch[i].segment); it != segments_.end()) it->second.saved_use = batch[i].use;
  }
  unsaved_since_.reset();
  return {};
}

void Store::touch_locked(Segment& seg) {
  seg.last_use = ++sequence_;
  const auto now = std::chrono::steady_clock::now();
  if (!unsaved_since_) unsaved_since_ = now;
  if (now - *unsaved_since_ < kUseFlushInterval) return;
  // Recency is a hint: failing to record it must not fail the lookup that made it.
  Status st = append_locked({});
  if (!st.ok()) KVTIER_LOG(*log_, kWarn, "{}: recording segment uses: {}", dir_, st.to_string());
}

std::vector<RecordMeta> Store::live_records_locked() const {
  std::vector<RecordMeta> out;
  out.reserve(index_.size());
  for (const auto& [key, meta] : index_) out.push_back(meta);
  return out;
}

std::vector<LocatedRecord> Store::all_records() {
  std::lock_guard lock(mu_);
  std::vector<LocatedRecord> out;
  for (const auto& [key, meta] : index_) out.push_back({meta, segments_.at(meta.segment).file});
  std::sort(out.begin(), out.end(), [](const LocatedRecord& a, const LocatedRecord& b) {
    return std::pair(a.meta.segment, a.meta.offset) < std::pair(b.meta.segment, b.meta.offset);
  });
  return out;
}

std::vector<SegmentInfo> Store::segments() {
  std::lock_guard lock(mu_);
  std::vector<SegmentInfo> out;
  for (const auto& [id, seg] : segments_) {
    out.push_back({id, seg.file->size, seg.write_offset, seg.live_bytes, seg.records, seg.tokens});
  }
  std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.id < b.id; });
  return out;
}

void Store::fill_stats(Stats& stats) {
  std::lock_guard lock(mu_);
  stats.capacity_bytes = capacity_;
  stats.segment_bytes = segment_bytes_;
  stats.segments = segments_.size();
  stats.used_bytes = segments_.size() * segment_bytes_;
  stats.records = index_.size();
  stats.live_bytes = 0;
  for (const auto& [id, seg] : segments_) stats.live_bytes += seg.live_bytes;
  stats.evicted_segments = evicted_segments_;
  stats.evicted_records = evicted_records_;
  stats.recovered_records = recovered_records_;
  stats.dropped_at_open = dropped_at_open_;
}

}  // namespace kvtier
