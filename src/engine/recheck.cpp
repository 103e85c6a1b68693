// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Re-read before drop. A record that fails a check on a restore is read once more another way
// (its segment file opened anew without O_DIRECT, read through the page cache by the POSIX channel
// and verified on the host: none of the failed read's O_DIRECT or cuFile reads, nor its device
// checks) before it is called corrupt. A bug or a transient fault in one data path then costs a
// miss, never the record. Both reads go through the one read route.
#include <fcntl.h>

#include <unordered_map>

#include "api/try.hpp"
#include "common/posix.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {
namespace {

/// `records` with each file opened anew for the page cache: the path the failed read did not
/// take. A record whose file cannot be opened keeps no file (read as nothing: no evidence).
std::vector<LocatedRecord> through_page_cache(Store& store, std::span<const LocatedRecord> records,
                                              const Logger& log) {
  std::unordered_map<const SegmentFile*, std::shared_ptr<SegmentFile>> reopened;
  std::vector<LocatedRecord> out;
  for (const LocatedRecord& r : records) {
    auto [it, fresh] = reopened.try_emplace(r.file.get());
    if (fresh) {
      auto file = store.reopen_buffered(*r.file);
      if (file) {
        it->second = std::move(*file);
      } else {
        KVTIER_LOG(log, kWarn, "re-read of a failed record: {}", file.error().to_string());
      }
    }
    out.push_back({r.meta, it->second});
  }
  return out;
}

}  // namespace

std::vector<RecheckOutcome> Engine::Impl::recheck(std::span<const LocatedRecord> records,
                                                  std::span<const uint64_t> first_tokens,
                                                  const KvMemory* destination) {
  std::vector<RecheckOutcome> out(records.size(), RecheckOutcome::kUnread);
  const std::vector<LocatedRecord> reopened = through_page_cache(*store_.get(), records, log_);
  for (size_t i = 0; i < records.size(); ++i) {
    const RecordMeta& m = records[i].meta;
    if (!reopened[i].file) continue;  // no evidence either way: kept, a miss
    std::vector<AlignedBuffer> image;
    const RecordState state = read_back(std::span(&reopened[i], 1), image)[0];
    if (state == RecordState::kIncomplete) {
      KVTIER_LOG(log_, kWarn, "re-read of a failed record: the read did not complete");
      continue;
    }
    if (state == RecordState::kCorrupt) {
      out[i] = RecheckOutcome::kCorrupt;
      continue;
    }
    out[i] = RecheckOutcome::kIntact;
    if (destination == nullptr) continue;
    // Verified here; placed through the route from host memory and verified again where it lands.
    const LocatedRecord held{m, nullptr};
    auto placed = read_route_->read_images(std::span(&held, 1), {image[0].span()},
                                           first_tokens.subspan(i, 1), *destination);
    const Status failed = placed ? placed->status : placed.error();
    if (!failed.ok() || placed->state(0, m) != RecordState::kIntact) {
      KVTIER_LOG(log_, kWarn, "a record verified on its re-read failed again where it landed: {}",
                 failed.ok() ? "checksum mismatch on the device" : failed.to_string());
      out[i] = RecheckOutcome::kIntactNotPlaced;
    }
  }
  return out;
}

}  // namespace kvtier
