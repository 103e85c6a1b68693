// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The public Engine over its parts: one Impl for a store per rank (format 1), one per head group
// the rank holds for a TP-free store (format 2, head_group_stores.cpp). A call goes to every part
// (in parallel where it moves data) and the answers combine: a session is held as far as every
// part holds it. No exception crosses the public API.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <new>
#include <optional>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"
#include "engine/head_group_stores.hpp"
#include "engine/hybrid.hpp"
#include "engine/parts.hpp"

namespace kvtier {
/// A save's parts combined: the session is stored as far as every part stored it. Parts that do
/// not write (read-only) are left out by the caller.
Result<SaveResult> combine(std::vector<Result<SaveResult>> results) {
  SaveResult all;
  bool first = true;
  for (auto& r : results) {
    if (!r) return fail(r.error());
    all.tokens_stored = first ? r->tokens_stored : std::min(all.tokens_stored, r->tokens_stored);
    all.chunks_written += r->chunks_written;
    all.chunks_present += r->chunks_present;
    all.bytes_written += r->bytes_written;
    first = false;
  }
  return all;
}

Result<RestoreResult> combine(std::vector<Result<RestoreResult>> results) {
  RestoreResult all;
  bool first = true;
  for (auto& r : results) {
    if (!r) return fail(r.error());
    all.tokens_restored =
        first ? r->tokens_restored : std::min(all.tokens_restored, r->tokens_restored);
    all.bytes_read += r->bytes_read;
    all.extents += r->extents;
    all.checksum_misses += r->checksum_misses;
    all.recheck_kept += r->recheck_kept;
    all.host_bytes += r->host_bytes;
    if (!r->problem.empty()) all.problem += (all.problem.empty() ? "" : "; ") + r->problem;
    first = false;
  }
  return all;
}

namespace {

template <typename Kv>
Result<SaveResult> save_parts(const Parts& parts, std::span<const Token> tokens, const Kv& source) {
  return combine(
      each_part(parts, [&](Engine::Impl& part) { return save_part(part, tokens, source); }));
}

template <typename Kv>
Result<RestoreResult> restore_parts(const Parts& parts, std::span<const Token> tokens,
                                    const Kv& destination) {
  return combine(each_part(parts, [&](Engine::Impl& part) {
    part.follow_writer();
    return on_kv_memory(part, destination, /*restore=*/true,
                        [&](Engine::Impl& p, const KvMemory& t) { return p.restore(tokens, t); });
  }));
}

}  // namespace

/// Counts of what an engine of several parts delivered, which no single part knows.
struct Engine::Delivered {
  std::atomic<uint64_t> lookup_hit_tokens{0};
  std::atomic<uint64_t> tokens_restored{0};
};

Engine::Engine(std::vector<std::unique_ptr<Impl>> parts, KvGeometry geometry)
    : parts_(std::move(parts)),
      geometry_(std::move(geometry)),
      delivered_(std::make_unique<Delivered>()) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::open(const Options& options) {
  return guarded([&]() -> Result<std::unique_ptr<Engine>> {
    KVTIER_ASSIGN_OR_RETURN(auto parts, open_store_parts(options));
    KvGeometry geometry = options.geometry;
    if (options.store_format == 1) geometry = parts[0]->options_.geometry;
    auto engine = std::unique_ptr<Engine>(new Engine(std::move(parts), std::move(geometry)));
    engine->format1_ = open_format1_beside(options);
    return engine;
  });
}

namespace {

/// The records each part's restore of `tokens` reads from its drives (none given: every record):
/// a hybrid model's parts hold different stretches of a prefix (hybrid_records).
std::vector<std::vector<LocatedRecord>> read_plans(const Parts& parts, const KvGeometry& g,
                                                   std::span<const Token> tokens) {
  if (g.hybrid() && !tokens.empty()) return hybrid_records(parts, g, tokens);
  std::vector<std::vector<LocatedRecord>> plans;
  for (const auto& part : parts) plans.push_back(part->read_plan(tokens));
  return plans;
}

Status needs_state(const KvGeometry& g, bool given) {
  if (given && g.state_layers == 0) {
    return {ErrorCode::kInvalidArgument,
            "state memory given, but the geometry has no recurrent layers (state_layers 0)"};
  }
  if (!given && g.state_layers > 0) {
    return {ErrorCode::kInvalidArgument,
            fmt::format("restore: a model with {} recurrent layers restores with their state "
                        "(the restore that takes StateMemory)",
                        g.state_layers)};
  }
  return {};
}

template <typename Kv>
Result<SaveResult> save_any(const Parts& parts, const KvGeometry& g, std::span<const Token> tokens,
                            const Kv& source, const StateMemory* state) {
  if (state != nullptr) KVTIER_TRY(needs_state(g, true));
  if (g.hybrid()) return hybrid_save(parts, g, tokens, source, state);
  return save_parts(parts, tokens, source);
}

template <typename Kv>
Result<RestoreResult> restore_any(const Parts& parts, Engine::Impl* format1, const KvGeometry& g,
                                  std::span<const Token> tokens, const Kv& destination,
                                  const StateMemory* state) {
  KVTIER_TRY(needs_state(g, state != nullptr));
  if (g.hybrid()) return hybrid_restore(parts, g, tokens, destination, state);
  if (format1 != nullptr) {
    // The format-1 store beside serves a session it holds further than the TP-free store (and
    // the cluster behind it) would deliver; where it falls short of that (a record failed its
    // check), the TP-free store serves after all.
    uint64_t tp_free = tokens.size();
    for (const auto& part : parts) {
      part->follow_writer();
      tp_free = std::min(tp_free, part->reachable_prefix(tokens));
    }
    if (format1->local_prefix(tokens) > tp_free) {
      auto from_format1 = [&] {
        return on_kv_memory(
            *format1, destination, /*restore=*/true,
            [&](Engine::Impl& p, const KvMemory& t) { return p.restore(tokens, t); });
      };
      Result<RestoreResult> old = from_format1();
      if (!old || old->tokens_restored >= tp_free) return old;
      Result<RestoreResult> now = restore_parts(parts, tokens, destination);
      // Both fell short: the format-1 prefix is no longer in place (the TP-free restore wrote
      // over it). Served again.
      if (now && now->tokens_restored < old->tokens_restored) return from_format1();
      return now;
    }
  }
  return restore_parts(parts, tokens, destination);
}

}  // namespace

Result<SaveResult> Engine::save(std::span<const Token> tokens, const ChunkedKv& source) {
  return guarded([&] { return save_any(parts_, geometry_, tokens, source, nullptr); });
}
Result<SaveResult> Engine::save(std::span<const Token> tokens, const PagedKv& source) {
  return guarded([&] { return save_any(parts_, geometry_, tokens, source, nullptr); });
}
Result<SaveResult> Engine::save(std::span<const Token> tokens, const ChunkedKv& source,
                                const StateMemory& state) {
  return guarded([&] { return save_any(parts_, geometry_, tokens, source, &state); });
}
Result<SaveResult> Engine::save(std::span<const Token> tokens, const PagedKv& source,
                                const StateMemory& state) {
  return guarded([&] { return save_any(parts_, geometry_, tokens, source, &state); });
}
Result<uint64_t> Engine::lookup(std::span<const Token> tokens) {
  return guarded([&]() -> Result<uint64_t> {
    if (geometry_.hybrid()) {
      parts_[0]->count_lookup();  // calls are counted by the first part
      KVTIER_ASSIGN_OR_RETURN(uint64_t held, hybrid_lookup(parts_, geometry_, tokens));
      delivered_->lookup_hit_tokens += held;
      return held;
    }
    uint64_t held = tokens.size();
    for (const auto& part : parts_) {
      part->follow_writer();
      KVTIER_ASSIGN_OR_RETURN(uint64_t h, part->lookup(tokens));
      held = std::min(held, h);
    }
    if (format1_) held = std::max(held, format1_->local_prefix(tokens));  // restore_any's choice
    if (counts_delivered()) delivered_->lookup_hit_tokens += held;
    return held;
  });
}
Result<RestoreResult> Engine::restore(std::span<const Token> tokens, const ChunkedKv& destination) {
  return guarded([&] {
    return delivered(restore_any(parts_, format1_.get(), geometry_, tokens, destination, nullptr));
  });
}
Result<RestoreResult> Engine::restore(std::span<const Token> tokens, const PagedKv& destination) {
  return guarded([&] {
    return delivered(restore_any(parts_, format1_.get(), geometry_, tokens, destination, nullptr));
  });
}
Result<RestoreResult> Engine::restore(std::span<const Token> tokens, const ChunkedKv& destination,
                                      const StateMemory& state) {
  return guarded([&] {
    return delivered(restore_any(parts_, format1_.get(), geometry_, tokens, destination, &state));
  });
}
Result<RestoreResult> Engine::restore(std::span<const Token> tokens, const PagedKv& destination,
                                      const StateMemory& state) {
  return guarded([&] {
    return delivered(restore_any(parts_, format1_.get(), geometry_, tokens, destination, &state));
  });
}
Result<uint64_t> Engine::evict(std::span<const Token> tokens) {
  return guarded([&]() -> Result<uint64_t> {
    if (geometry_.hybrid()) return hybrid_evict(parts_, geometry_, tokens);
    uint64_t dropped = 0;
    for (const auto& part : parts_) {
      if (part->part_.follower) continue;  // the group's writer evicts what the group holds
      KVTIER_ASSIGN_OR_RETURN(uint64_t d, part->evict(tokens));
      dropped += d;
    }
    return dropped;
  });
}
Result<VerifyReport> Engine::verify(const ProgressFn& progress) {
  return guarded([&]() -> Result<VerifyReport> {
    VerifyReport all;
    for (const auto& part : parts_) {
      KVTIER_ASSIGN_OR_RETURN(VerifyReport r, part->verify(progress));
      all.records_checked += r.records_checked;
      all.bytes_checked += r.bytes_checked;
      all.corrupt_records += r.corrupt_records;
      all.problems.insert(all.problems.end(), r.problems.begin(), r.problems.end());
    }
    return all;
  });
}
Result<CeilingResult> Engine::measure_read_ceiling(std::span<const Token> tokens) {
  return guarded([&] { return ceiling_of_parts(tokens); });
}
Result<CeilingResult> Engine::ceiling_of_parts(std::span<const Token> tokens) {
  // The parts read at once, as a restore reads them: the ceiling is their bytes over the wall time.
  const std::vector<std::vector<LocatedRecord>> plans = read_plans(parts_, geometry_, tokens);
  auto plan_of = [&](const Impl& part) -> std::span<const LocatedRecord> {
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (parts_[i].get() == &part) return plans[i];
    }
    return {};
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<Result<CeilingResult>> results =
      each_part(parts_, [&](Impl& part) { return part.measure_read_ceiling(plan_of(part)); });
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CeilingResult all;
  for (auto& r : results) {
    if (!r) return fail(r.error());
    all.bytes += r->bytes;
    all.seconds = std::max(all.seconds, r->seconds);
  }
  if (parts_.size() > 1) all.seconds = wall;
  return all;
}
Result<std::vector<FileExtent>> Engine::read_extents(std::span<const Token> tokens) {
  return guarded([&]() -> Result<std::vector<FileExtent>> {
    const std::vector<std::vector<LocatedRecord>> plans = read_plans(parts_, geometry_, tokens);
    std::vector<FileExtent> all;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const std::vector<FileExtent> e = parts_[i]->read_extents(plans[i]);
      all.insert(all.end(), e.begin(), e.end());
    }
    return all;
  });
}
Result<std::vector<RemoteRecordKey>> Engine::remote_keys(std::span<const Token> tokens) {
  return guarded([&]() -> Result<std::vector<RemoteRecordKey>> {
    std::vector<RemoteRecordKey> all;
    for (const auto& part : parts_) {
      // A hybrid model's full-attention chains: its window and state records are named by where
      // saves ended, not by every chunk.
      if (part->part_.kind != 1) continue;
      KVTIER_ASSIGN_OR_RETURN(std::vector<RemoteRecordKey> k, part->remote_keys(tokens));
      all.insert(all.end(), k.begin(), k.end());
    }
    return all;
  });
}
Result<RemoteSyncReport> Engine::sync_remote(std::span<const Token> tokens,
                                             const ProgressFn& progress) {
  return guarded([&]() -> Result<RemoteSyncReport> {
    // A hybrid model's window and state records are no chain of the tokens: of a token list,
    // those a restore of its held prefix reads are published (every record without one).
    std::vector<std::vector<LocatedRecord>> plans;
    if (geometry_.hybrid() && !tokens.empty()) plans = hybrid_records(parts_, geometry_, tokens);
    RemoteSyncReport all;
    for (size_t i = 0; i < parts_.size(); ++i) {
      Engine::Impl& part = *parts_[i];
      KVTIER_ASSIGN_OR_RETURN(RemoteSyncReport r, plans.empty() || part.part_.kind == 1
                                                      ? part.sync_remote(tokens, progress)
                                                      : part.sync_records(plans[i], progress));
      all.records += r.records;
      all.already_present += r.already_present;
      all.published += r.published;
      all.failed += r.failed;
      if (all.problem.empty()) all.problem = r.problem;
    }
    return all;
  });
}
void Engine::wait_remote() {
  for (const auto& part : parts_) {
    if (part->remote_) part->remote_->drain();
  }
}
Status Engine::drop_page_cache() {
  try {
    for (const auto& part : parts_) KVTIER_TRY(part->drop_page_cache());
    return {};
  } catch (const std::exception& e) {
    return {ErrorCode::kInternal, e.what()};
  }
}
Stats Engine::stats() const {
  std::vector<Stats> each;
  for (const auto& part : parts_) each.push_back(part->stats());
  // The format-1 store served beside: its records and what it served count too.
  if (format1_) each.push_back(format1_->stats());
  Stats all = combine_part_stats(each);
  if (format1_) all.restores += each.back().restores;  // calls it served, which no part saw
  if (counts_delivered()) {
    // What the calls delivered: the prefix every part held or restored.
    all.lookup_hit_tokens = delivered_->lookup_hit_tokens;
    all.tokens_restored = delivered_->tokens_restored;
    // A hybrid model's parts restore different spans of different layers (and its state): what
    // they counted, summed. Otherwise every layer of the prefix every part delivered.
    if (!geometry_.hybrid())
      all.bytes_restored = delivered_->tokens_restored * geometry_.bytes_per_token();
  }
  return all;
}

bool Engine::counts_delivered() const { return parts_.size() > 1 || format1_ != nullptr; }

Result<RestoreResult> Engine::delivered(Result<RestoreResult> result) {
  if (result && counts_delivered()) delivered_->tokens_restored += result->tokens_restored;
  return result;
}
std::vector<SegmentInfo> Engine::segments() const {
  std::vector<SegmentInfo> all;
  for (const auto& part : parts_) {
    std::vector<SegmentInfo> s = part->store_->segments();
    all.insert(all.end(), s.begin(), s.end());
  }
  return all;
}
IoSettings Engine::io_settings() const { return parts_[0]->io_settings_; }
Result<IoSettings> Engine::tune() {
  // Every part's store lies on the same drives, which the first part's probe measures; the other
  // parts read with what it found (open_store_parts).
  return guarded([&] { return parts_[0]->tune(); });
}
const std::string& Engine::store_dir() const { return parts_[0]->store_dir_; }
const KvGeometry& Engine::geometry() const { return geometry_; }

}  // namespace kvtier
