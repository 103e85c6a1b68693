// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kvtier/engine.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include <utility>

#include <fmt/format.h>

#include "api/env.hpp"
#include "api/try.hpp"
#include "common/posix.hpp"
#include "engine/engine_impl.hpp"
#include "engine/tiers/tier_list.hpp"
#include "engine/tuning.hpp"

namespace kvtier {

namespace {

// What `options` set explicitly (before resolved() filled in defaults) that the store checks.
Result<StoreRequest> store_request(const Options& options) {
  KVTIER_ASSIGN_OR_RETURN(EnvOverrides env, read_env_overrides());
  StoreRequest request;
  if (options.segment_bytes != 0) {
    request.segment_bytes = options.segment_bytes;
    request.segment_bytes_source = "Options::segment_bytes (--segment-size)";
  } else if (env.segment_bytes) {
    request.segment_bytes = env.segment_bytes;
    request.segment_bytes_source = "KVTIER_SEGMENT_BYTES";
  }
  if (options.capacity_bytes != 0) {
    request.capacity_bytes = options.capacity_bytes;
    request.capacity_bytes_source = "Options::capacity_bytes (--capacity)";
  } else if (env.capacity_bytes) {
    request.capacity_bytes = env.capacity_bytes;
    request.capacity_bytes_source = "KVTIER_CAPACITY_BYTES";
  }
  return request;
}

/// What std::bad_alloc from allocating `bytes` of host memory for `what` means: the resource error
/// (exit 4 in the CLI) with the numbers, not an internal one.
Status host_allocation_failed(std::string_view what, uint64_t bytes) {
  return {ErrorCode::kNoSpace,
          fmt::format("{}: {} bytes ({}) of host memory asked for: the allocation failed ({})",
                      what, bytes, binary_bytes(bytes), host_memory_limits()),
          ENOMEM};
}

Result<std::unique_ptr<StagingPool>> make_staging(const Options& o) {
  const uint64_t bytes = StagingPool::bytes_for(o.staging_bytes, o.io_request_bytes);
  KVTIER_TRY(check_host_memory(bytes, "staging"));
  try {
    return std::make_unique<StagingPool>(o.staging_bytes, o.io_request_bytes);
  } catch (const std::bad_alloc&) {
    return fail(host_allocation_failed("staging", bytes));
  }
}

/// The remote tier's value buffers: as many as the staging bound holds, one record at least.
Result<std::shared_ptr<RemoteArena>> make_remote_arena(const Options& o) {
  const char* what = "remote tier buffers (the staging size, one record at least)";
  const uint64_t record = kBlock + o.geometry.bytes_for_tokens(o.geometry.chunk_tokens);
  const uint64_t bytes = RemoteArena::bytes_for(record, o.staging_bytes);
  KVTIER_TRY(check_host_memory(bytes, what));
  try {
    return std::make_shared<RemoteArena>(record, o.staging_bytes);
  } catch (const std::bad_alloc&) {
    return fail(host_allocation_failed(what, bytes));
  }
}

}  // namespace

Result<std::unique_ptr<Engine::Impl>> Engine::Impl::create(const Options& options,
                                                           const StorePart& part) {
  auto impl = std::make_unique<Impl>();
  KVTIER_ASSIGN_OR_RETURN(impl->options_, options.resolved());
  impl->part_ = part;
  if (part.new_store_capacity != 0) {
    // None asked for: a new store takes the part's share, an existing one keeps its own (there is
    // no capacity request below).
    Options share = options;
    share.capacity_bytes = part.new_store_capacity;
    KVTIER_ASSIGN_OR_RETURN(impl->options_, share.resolved());
  }
  if (part.no_dram) impl->options_.dram_bytes = 0;  // not even from KVTIER_DRAM_BYTES
  auto split_staging = [&part](Options& o) {
    if (part.staging_split > 1) {
      const StoreShare each = split_share(o.staging_bytes, o.io_request_bytes, part.staging_split);
      o.io_request_bytes = each.request_bytes;
      o.staging_bytes = each.staging_bytes;
    }
  };
  // The rank's, before any split.
  const uint64_t whole_request = impl->options_.io_request_bytes;
  const uint64_t whole_staging = impl->options_.staging_bytes;
  split_staging(impl->options_);
  const Options& o = impl->options_;
  impl->log_ = Logger(o.log_sink, o.log_level.value_or(LogLevel::kWarn));
  KVTIER_ASSIGN_OR_RETURN(StoreRequest request, store_request(options));
  // A read-only open takes the store as it is: it could apply no other segment size or capacity.
  if (o.read_only) request = {};
  // Host memory before the store: an engine that cannot have it creates no store.
  if (o.dram_bytes > 0) {
    KVTIER_ASSIGN_OR_RETURN(
        impl->dram_,
        DramTier::create(o.dram_bytes,
                         align_up(kBlock + o.geometry.bytes_for_tokens(o.geometry.chunk_tokens))));
  }
  KVTIER_ASSIGN_OR_RETURN(auto staging, make_staging(o));
  if (!o.remote.seeds.empty()) {
    KVTIER_ASSIGN_OR_RETURN(impl->remote_arena_, make_remote_arena(o));
  }
  StoreConfig config = StoreConfig::of(o);
  config.dir_name = part.dir_name;
  config.record_kind = part.kind;
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::open(config, impl->log_, request));
  impl->store_dir_ = store->dir();
  impl->store_.reset(std::move(store));
  impl->store_config_ = config;
  const uint64_t defaults_request = o.io_request_bytes, defaults_staging = o.staging_bytes;
  // The tuning (or the defaults it falls back to) is the rank's whole request and staging, in
  // io_settings_; this store reads with its share.
  impl->options_.io_request_bytes = whole_request;
  impl->options_.staging_bytes = whole_staging;
  KVTIER_ASSIGN_OR_RETURN(bool retuned, impl->apply_tuning(options));
  if (part.tuned_readers > 0 && impl->io_settings_.source == "tuned") {
    const StoreShare each = tuned_share(o.staging_bytes, o.io_request_bytes, part.tuned_readers);
    impl->options_.io_request_bytes = each.request_bytes;
    impl->options_.staging_bytes = each.staging_bytes;
    retuned = o.io_request_bytes != defaults_request || o.staging_bytes != defaults_staging;
  } else if (part.staging_split > 1) {
    split_staging(impl->options_);
    retuned = o.io_request_bytes != defaults_request || o.staging_bytes != defaults_staging;
  }
  if (retuned) {
    KVTIER_TRY(impl->remake_host_buffers(staging, {defaults_request, defaults_staging},
                                         {whole_request, whole_staging}));
  }
  std::vector<std::span<std::byte>> pinned;
  if (impl->dram_) pinned.push_back(impl->dram_->arena());
  if (impl->remote_arena_) pinned.push_back(impl->remote_arena_->memory());

  impl->namespace_ = namespace_key(o.geometry, o.tenant, o.store_format, part.namespace_part);
  impl->kit_ = std::make_unique<TransferKit>(o.io_path, std::move(staging), std::move(pinned),
                                             impl->store_->direct_io(),
                                             impl->store_->direct_io_fallback(), impl->log_);
  KVTIER_ASSIGN_OR_RETURN(EnvOverrides env, read_env_overrides());
  impl->read_route_ = std::make_unique<ReadRoute>(
      *impl->kit_, impl->store_->record_shape(), impl->counters_,
      env.coded_run_bytes.value_or(kCodedRunBytes), env.consumer_threads);
  if (!o.remote.seeds.empty()) {
    KVTIER_ASSIGN_OR_RETURN(impl->remote_, ClusterLink::open(o.remote, impl->log_));
  }
  impl->tiers_ = make_tiers(*impl);
  if (impl->store_->index_rebuilt() && !impl->store_->read_only()) impl->check_rebuilt_records();
  return impl;
}

void Engine::Impl::check_rebuilt_records() {
  // A rebuilt index holds every record whose header reached the disk, payload unread: what a crash
  // left of a write that was never acknowledged comes back with it, and a save of its key would
  // take it for stored and write nothing. So every record is read and checked once, before any
  // save; the damaged ones are dropped (restores check every payload regardless).
  auto checked = verify({});
  if (!checked) {
    KVTIER_LOG(log_, kWarn,
               "{}: the rebuilt index's records could not all be read and checked ({}): a save "
               "of a key whose stored copy is damaged writes nothing until a restore finds it",
               store_dir_, checked.error().message());
    return;
  }
  KVTIER_LOG(log_, kWarn,
             "{}: the rebuilt index's {} records read and checked: {} damaged, dropped", store_dir_,
             checked->records_checked, checked->corrupt_records);
}

Result<bool> Engine::Impl::apply_tuning(const Options& asked) {
  KVTIER_ASSIGN_OR_RETURN(EnvOverrides env, read_env_overrides());
  const bool in_options = asked.io_request_bytes != 0 || asked.staging_bytes != 0;
  const bool in_env = env.io_request_bytes || env.staging_bytes;
  if (in_options || in_env || !options_.tune) {
    io_settings_ = {options_.io_request_bytes, options_.staging_bytes,
                    in_options ? "options"
                    : in_env   ? "environment"
                               : "defaults (tuning off)",
                    tune_drives(*store_.get(), TuneMode::kRead, log_)};
    return false;
  }
  const TuneMode mode = store_->read_only() ? TuneMode::kRead : TuneMode::kProbeUntuned;
  io_settings_ = io_from_tuning(tune_drives(*store_.get(), mode, log_), options_);
  const bool changed = io_settings_.request_bytes != options_.io_request_bytes ||
                       io_settings_.staging_bytes != options_.staging_bytes;
  options_.io_request_bytes = io_settings_.request_bytes;
  options_.staging_bytes = io_settings_.staging_bytes;
  return changed;
}

Status Engine::Impl::remake_host_buffers(std::unique_ptr<StagingPool>& staging,
                                         const IoSettings& defaults,
                                         const IoSettings& defaults_shown) {
  staging.reset();
  remote_arena_.reset();
  auto tuned = make_staging(options_);
  if (!tuned) {
    // The defaults were had a moment ago: a tuning never costs an open that would have worked.
    KVTIER_LOG(log_, kWarn, "drive tuning: {}; reading with the defaults instead",
               tuned.error().message());
    io_settings_.source = "defaults (the tuned staging could not be had)";
    options_.io_request_bytes = defaults.request_bytes;
    options_.staging_bytes = defaults.staging_bytes;
    io_settings_.request_bytes = defaults_shown.request_bytes;
    io_settings_.staging_bytes = defaults_shown.staging_bytes;
    KVTIER_ASSIGN_OR_RETURN(tuned, make_staging(options_));
  }
  staging = std::move(*tuned);
  if (!options_.remote.seeds.empty()) {
    KVTIER_ASSIGN_OR_RETURN(remote_arena_, make_remote_arena(options_));
  }
  return {};
}

Result<IoSettings> Engine::Impl::tune() {
  if (store_->read_only()) {
    return fail(ErrorCode::kPermission, "tune: the store is open read-only (" +
                                            store_->read_only_reason() +
                                            "): the drives' tunings cannot be kept");
  }
  IoSettings found =
      io_from_tuning(tune_drives(*store_.get(), TuneMode::kProbeAll, log_), options_);
  const bool tuned = found.source == "tuned";
  found.source = "tuned (used by engines opened from now on)";
  if (tuned && part_.tuned_readers > 0) {
    // What this rank's engines will read with: its stores' shares of the probe's whole.
    share_tuned_settings(found, part_.tuned_readers);
  }
  return found;
}

Engine::Impl::~Impl() = default;

void Engine::Impl::follow_writer() {
  if (!part_.follower || !store_->index_changed()) return;
  auto newer = Store::open(store_config_, log_, {});
  if (!newer) {
    KVTIER_LOG(log_, kWarn,
               "{}: a newer snapshot of the writer's index could not be read ({}); "
               "serving the one held",
               store_->dir(), newer.error().message());
    return;
  }
  store_.reset(std::move(*newer));
}

std::vector<LocatedRecord> Engine::Impl::find_prefix(std::span<const Token> tokens) {
  const std::vector<Key128> keys = chain_keys(namespace_, tokens, options_.geometry.chunk_tokens);
  return find_prefix(tokens, keys);
}

std::vector<LocatedRecord> Engine::Impl::find_prefix(std::span<const Token> tokens,
                                                     std::span<const Key128> keys) {
  const uint32_t chunk = options_.geometry.chunk_tokens;
  std::vector<LocatedRecord> found = store_->find_chain(keys);
  if (found.size() == keys.size() || (!found.empty() && found.back().meta.token_count < chunk)) {
    return found;
  }
  // The next chunk is not stored whole; a shorter partial chunk under the same parent may be.
  const std::vector<RecordMeta> partial =
      partial_chunks(tokens, keys, found.size() * uint64_t{chunk});
  if (!partial.empty()) {
    if (auto rec = store_->find(partial.front().key)) found.push_back(*rec);
  }
  return found;
}

std::vector<RecordMeta> Engine::Impl::partial_chunks(std::span<const Token> tokens,
                                                     std::span<const Key128> keys,
                                                     uint64_t boundary) {
  const uint32_t chunk = options_.geometry.chunk_tokens;
  const uint64_t whole = boundary / chunk;
  if (boundary % chunk != 0 || boundary > tokens.size() || whole > keys.size()) return {};
  const Key128 parent = whole == 0 ? namespace_ : keys[whole - 1];
  std::vector<RecordMeta> out;
  for (const RecordMeta& m : store_->partial_children(parent)) {
    if (boundary + m.token_count > tokens.size()) continue;
    if (chunk_key(parent, tokens.subspan(boundary, m.token_count)) == m.key) out.push_back(m);
  }
  std::sort(out.begin(), out.end(),
            [](const RecordMeta& a, const RecordMeta& b) { return a.token_count > b.token_count; });
  return out;
}

Result<uint64_t> Engine::Impl::lookup(std::span<const Token> tokens) {
  counters_.lookups++;
  const uint64_t hit = reachable_prefix(tokens);
  counters_.lookup_hit_tokens += hit;
  return hit;
}

uint64_t Engine::Impl::local_prefix(std::span<const Token> tokens) {
  uint64_t held = 0;
  for (const LocatedRecord& r : find_prefix(tokens)) held += r.meta.token_count;
  return held;
}

uint64_t Engine::Impl::reachable_prefix(std::span<const Token> tokens) {
  return reachable_prefix(tokens, chain_keys(namespace_, tokens, options_.geometry.chunk_tokens));
}

uint64_t Engine::Impl::reachable_prefix(std::span<const Token> tokens,
                                        std::span<const Key128> keys) {
  const uint64_t chunk = options_.geometry.chunk_tokens;
  const std::vector<LocatedRecord> found = find_prefix(tokens, keys);
  uint64_t hit = 0;
  for (const LocatedRecord& r : found) hit += r.meta.token_count;
  // Where restore() would go on past the local index, and how far a tier behind it holds the
  // chain from there.
  const size_t from = remote_start(tokens, found);
  for (const auto& tier : tiers_) {
    const uint64_t held = tier->held_run(tokens, keys, from);
    if (held > 0) hit = std::max(hit, std::min<uint64_t>((from + held) * chunk, tokens.size()));
  }
  return hit;
}

Result<uint64_t> Engine::Impl::evict(std::span<const Token> tokens) {
  std::vector<Key128> keys;
  for (const LocatedRecord& r : find_prefix(tokens)) keys.push_back(r.meta.key);
  return drop_keys(keys);
}

Result<uint64_t> Engine::Impl::drop_keys(std::span<const Key128> keys) {
  for (const auto& tier : tiers_) tier->erase(keys);
  KVTIER_TRY(store_->drop(keys));
  return keys.size();
}

Status Engine::Impl::drop_page_cache() {
  // Once per segment file, not once per record: all_records() is grouped by segment.
  const SegmentFile* last = nullptr;
  for (const LocatedRecord& r : store_->all_records()) {
    if (r.file.get() == last) continue;
    last = r.file.get();
    int rc = ::posix_fadvise(r.file->fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    if (rc != 0) return posix_error(rc, "posix_fadvise " + r.file->path);
  }
  return {};
}

Stats Engine::Impl::stats() const {
  Stats s;
  counters_.fill(s);
  s.io_engine = kit_->io_name();
  s.io_fallback = kit_->fallback();
  s.gds = kit_->gds_note();
  s.gds_io_counts = kit_->gds_io_counts();
  store_->fill_stats(s);
  s.fallbacks = kit_->fallbacks();
  s.remote = "off";
  if (remote_) remote_->fill_stats(s);
  s.dram_records = dram_ ? dram_->entries() : 0;
  return s;
}

}  // namespace kvtier
