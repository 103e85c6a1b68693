// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "io/pipeline.hpp"

#include <algorithm>
#include <cerrno>

#include "common/posix.hpp"
#include "common/try.hpp"

namespace kvtier {
namespace {

struct SlotState {
  size_t piece = 0;
  uint32_t done = 0;  // bytes already transferred (short transfers are resumed)
};

IoRequest request_for(const Piece& p, std::span<std::byte> slot, uint32_t done, bool write, size_t tag) {
  return {p.fd, p.offset + done, slot.data() + done, p.length - done, write, tag};
}

}  // namespace

Status run_pipeline(IoEngine& engine, std::span<const Piece> pieces,
                    std::span<const std::span<std::byte>> slots, bool write, PieceSink& sink) {
  if (pieces.empty()) return {};
  if (slots.empty()) return {ErrorCode::kInternal, "pipeline without staging slots"};
  std::vector<SlotState> state(slots.size());
  std::vector<IoCompletion> completions(slots.size());
  size_t next = 0;
  size_t in_flight = 0;
  Status first_error;

  auto start = [&](size_t slot) -> Status {
    const size_t index = next++;
    KVTIER_TRY(sink.release(slot));
    state[slot] = {index, 0};
    std::span<std::byte> data = slots[slot].first(pieces[index].length);
    if (write) KVTIER_TRY(sink.fill(index, data));
    KVTIER_TRY(engine.enqueue(request_for(pieces[index], data, 0, write, slot)));
    ++in_flight;
    return {};
  };
  auto note_error = [&](Status st) {
    if (first_error.ok()) first_error = std::move(st);
  };

  for (size_t s = 0; s < slots.size() && next < pieces.size() && first_error.ok(); ++s) note_error(start(s));
  if (in_flight > 0) note_error(engine.submit());
  while (in_flight > 0) {
    auto n = engine.wait(completions);
    if (!n) return n.error();  // the queue is broken; nothing more can be reaped
    for (size_t i = 0; i < *n; ++i) {
      const size_t slot = completions[i].tag;
      const int64_t res = completions[i].result;
      SlotState& st = state[slot];
      const Piece& piece = pieces[st.piece];
      --in_flight;
      if (!first_error.ok()) continue;
      if (res == -EINTR || res == -EAGAIN) {
        note_error(engine.enqueue(request_for(piece, slots[slot], st.done, write, slot)));
        ++in_flight;
        continue;
      }
      if (res < 0) {
        note_error(posix_error(static_cast<int>(-res),
                               write ? "write of a store segment" : "read of a store segment"));
        continue;
      }
      if (res == 0) {
        note_error({ErrorCode::kCorrupt, "segment file ends before a record does (short read)"});
        continue;
      }
      st.done += static_cast<uint32_t>(res);
      if (st.done < piece.length) {  // short transfer: go on from where it stopped
        note_error(engine.enqueue(request_for(piece, slots[slot], st.done, write, slot)));
        ++in_flight;
        continue;
      }
      if (!write) note_error(sink.consume(st.piece, slot, slots[slot].first(piece.length)));
      if (first_error.ok() && next < pieces.size()) note_error(start(slot));
    }
    if (in_flight > 0) {
      Status st = engine.submit();
      if (!st.ok()) {
        note_error(st);
      }
    }
  }
  if (!first_error.ok()) return first_error;
  for (size_t s = 0; s < slots.size(); ++s) KVTIER_TRY(sink.release(s));
  return {};
}

void split_into_pieces(int fd, uint64_t offset, uint64_t length, uint64_t max_piece,
                       std::vector<Piece>& out) {
  for (uint64_t done = 0; done < length; done += max_piece) {
    out.push_back({fd, offset + done, static_cast<uint32_t>(std::min(max_piece, length - done))});
  }
}

StagingPool::StagingPool(uint64_t total_bytes, uint64_t slot_bytes) : slot_bytes_(slot_bytes) {
  size_t count = std::max<uint64_t>(1, total_bytes / slot_bytes);
  for (size_t i = 0; i < count; ++i) {
    buffers_.emplace_back(slot_bytes);
    free_.push_back(i);
  }
}

StagingPool::Lease StagingPool::acquire(size_t want) {
  std::unique_lock lock(mu_);
  freed_.wait(lock, [&] { return !free_.empty(); });
  size_t take = std::min(std::max<size_t>(want, 1), free_.size());
  std::vector<size_t> ids(free_.end() - static_cast<ptrdiff_t>(take), free_.end());
  free_.resize(free_.size() - take);
  return Lease(this, std::move(ids));
}

void StagingPool::give_back(const std::vector<size_t>& ids) {
  {
    std::lock_guard lock(mu_);
    free_.insert(free_.end(), ids.begin(), ids.end());
  }
  freed_.notify_all();
}

StagingPool::Lease::Lease(StagingPool* pool, std::vector<size_t> ids) : pool_(pool), ids_(std::move(ids)) {
  for (size_t id : ids_) spans_.push_back(pool_->buffers_[id].span());
}

StagingPool::Lease::Lease(Lease&& o) noexcept
    : pool_(o.pool_), ids_(std::move(o.ids_)), spans_(std::move(o.spans_)) {
  o.ids_.clear();
}

StagingPool::Lease::~Lease() {
  if (!ids_.empty()) pool_->give_back(ids_);
}

}  // namespace kvtier
