// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The read ceiling: kvtier's own (the reads of a restore through the POSIX channel, the bytes
// discarded, kept as attribution) and the file ranges a restore reads, for an independent tool
// (fio) to measure the ceiling on.
#include <chrono>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {

std::vector<LocatedRecord> Engine::Impl::read_plan(std::span<const Token> tokens) {
  return tokens.empty() ? store_->all_records() : find_prefix(tokens);
}

Result<CeilingResult> Engine::Impl::measure_read_ceiling(std::span<const LocatedRecord> all) {
  Channel& channel = kit_->posix_channel();
  std::vector<RecordMeta> records;
  std::vector<int> fds;
  for (const LocatedRecord& r : all) {
    records.push_back(r.meta);
    fds.push_back(r.file->fd.get());
  }
  const IoPlan plan = plan_io(records, fds, channel.staging().slot_bytes());
  PieceSink discard;
  StagingPool::Lease lease = channel.staging().acquire(plan.pieces.size());
  auto start = std::chrono::steady_clock::now();
  KVTIER_TRY(channel.read(channel_files(all), plan.pieces, lease, discard, 0));
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return CeilingResult{plan.bytes, elapsed.count()};
}

std::vector<FileExtent> Engine::Impl::read_extents(std::span<const LocatedRecord> records) const {
  std::vector<FileExtent> extents;
  for (const LocatedRecord& r : records) {
    const uint64_t bytes = r.meta.record_bytes();
    if (!extents.empty() && extents.back().path == r.file->path &&
        extents.back().offset + extents.back().length == r.meta.offset) {
      extents.back().length += bytes;
    } else {
      extents.push_back(FileExtent{r.file->path, r.meta.offset, bytes});
    }
  }
  return extents;
}

}  // namespace kvtier
