// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A CUDA transfer: H2D copies from pinned staging on one stream per slot, then the scatter kernel
// (which also checksums) from device staging into the caller's KV memory; saves the reverse. Its
// streams, events and device memory come from the GPU's pool and go back to it.
#include "cuda/cuda_transfer.hpp"

#include <atomic>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "api/try.hpp"
#include "codec/split16.hpp"
#include "cuda/cuda_status.hpp"
#include "cuda/kernels.hpp"
#include "cuda/split16_decode.hpp"

namespace kvtier {
namespace {

/// Waits on the host for the work queued on `stream` so far, through `event` (blocking sync: the
/// thread sleeps instead of spinning a core).
Status wait_for(cudaStream_t stream, cudaEvent_t event, std::string_view what) {
  KVTIER_TRY(cuda_status(cudaEventRecord(event, stream), what));
  return cuda_status(cudaEventSynchronize(event), what);
}

/// Where a transfer's pieces of scratch memory start: every offset a multiple of 8.
struct ScratchLayout {
  size_t sums = 0;         // scatter's kvsum sums, one per record
  size_t record_sums = 0;  // record_sums()'s, one per record
  size_t layer_base = 0;   // paged forms: one pointer per layer
  size_t block_table = 0;  // paged forms: one int32 per block
  size_t bytes = 0;

  ScratchLayout(size_t records, size_t layers, size_t blocks) {
    record_sums = sums + records * 8;
    layer_base = record_sums + records * 8;
    block_table = layer_base + layers * sizeof(uint8_t*);
    bytes = block_table + blocks * sizeof(int32_t);
  }
};

class CudaTransfer final : public DeviceTransfer {
 public:
  static Result<std::unique_ptr<CudaTransfer>> create(CudaPool& pool, const KvMemory& target,
                                                      size_t records, size_t slots,
                                                      size_t slot_bytes) {
    auto t = std::unique_ptr<CudaTransfer>(new CudaTransfer(pool));
    t->device_ = target.device;
    KVTIER_TRY(t->select());
    t->params_ = target.params;
    KVTIER_TRY(cuda_shape_supported(t->params_));
    t->records_ = records;
    const ScratchLayout at(std::max<size_t>(records, 1), target.layer_base.size(),
                           target.block_table.size());
    KVTIER_ASSIGN_OR_RETURN(t->scratch_, pool.take_scratch(at.bytes));
    uint8_t* scratch = t->scratch_->memory.get();
    t->sums_ = reinterpret_cast<unsigned long long*>(scratch + at.sums);
    t->record_sums_ = reinterpret_cast<unsigned long long*>(scratch + at.record_sums);
    // Every slot's stream is non-blocking, so nothing orders them after work on the legacy default
    // stream: a plain cudaMemcpy from pageable memory may return before its DMA lands, and a kernel
    // on a slot stream would then read half-written layer pointers (seen under 8 concurrent
    // restores: illegal address). Set up on the scratch's own stream and wait for it.
    cudaStream_t setup = t->scratch_->stream;
    KVTIER_TRY(cuda_status(cudaMemsetAsync(t->sums_, 0, std::max<size_t>(records, 1) * 8, setup),
                           "cudaMemsetAsync"));
    if (!target.layer_base.empty()) {
      auto* layer_base = reinterpret_cast<uint8_t**>(scratch + at.layer_base);
      auto* block_table = reinterpret_cast<int32_t*>(scratch + at.block_table);
      KVTIER_TRY(cuda_status(cudaMemcpyAsync(layer_base, target.layer_base.data(),
                                             target.layer_base.size() * sizeof(uint8_t*),
                                             cudaMemcpyHostToDevice, setup),
                             "copying layer pointers"));
      KVTIER_TRY(cuda_status(cudaMemcpyAsync(block_table, target.block_table.data(),
                                             target.block_table.size() * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, setup),
                             "copying the block table"));
      t->params_.layer_base = layer_base;
      t->params_.block_table = block_table;
    }
    KVTIER_TRY(wait_for(setup, t->scratch_->event, "setting up a transfer"));
    KVTIER_ASSIGN_OR_RETURN(t->slots_, pool.take_slots(slots, slot_bytes));
    t->pending_.assign(slots, 0);
    KVTIER_TRY(t->order_after(target.stream));
    return t;
  }

  /// Makes every slot stream, and the scratch stream record_sums() runs on, wait for the work the
  /// caller queued on `caller` before this call.
  /// The slot streams are non-blocking: nothing else orders them after a kernel still writing the
  /// KV a save reads (its checksum would be of half-written bytes, and the record later dropped as
  /// corrupt), or after a pending fill of a restore's destination (it would overwrite the KV).
  Status order_after(void* caller) {
    cudaStream_t stream = caller == nullptr ? cudaStreamLegacy : static_cast<cudaStream_t>(caller);
    // The event's record at the time of each wait is what the wait takes: reusing it later is safe.
    cudaEvent_t ready = scratch_->event;
    KVTIER_TRY(cuda_status(cudaEventRecord(ready, stream), "recording the caller's stream"));
    for (const auto& s : slots_) {
      KVTIER_TRY(cuda_status(cudaStreamWaitEvent(s->stream, ready, 0),
                             "ordering after the caller's stream"));
    }
    return cuda_status(cudaStreamWaitEvent(scratch_->stream, ready, 0),
                       "ordering after the caller's stream");
  }

  ~CudaTransfer() override {
    (void)select();
    // Back to the pool only when idle and healthy; a stream that failed is not handed on.
    bool idle = true;
    for (const auto& s : slots_) idle = cudaStreamSynchronize(s->stream) == cudaSuccess && idle;
    if (scratch_) idle = cudaStreamSynchronize(scratch_->stream) == cudaSuccess && idle;
    if (coded_) {
      pool_.free_room(room_, coded_->stream);
      idle = cudaStreamSynchronize(coded_->stream) == cudaSuccess && idle;
    }
    if (idle) {
      pool_.put(std::move(slots_), std::move(scratch_));
      if (coded_) pool_.put_stream(std::move(coded_));
    }
  }

  Status scatter(size_t slot, std::span<const std::byte> piece,
                 std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    CudaSlot& s = *slots_[slot];
    // Only payload bytes cross to the GPU (headers were checked on the host): host traffic stays at
    // one DMA in from storage and one DMA out per payload byte.
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(cuda_status(
          cudaMemcpyAsync(s.staging.get() + span.piece_offset, piece.data() + span.piece_offset,
                          span.bytes, cudaMemcpyHostToDevice, s.stream),
          "H2D copy of a staging piece"));
      copied_ += span.bytes;
    }
    std::vector<cuda::ScatterJob> jobs;
    for (const PieceSpan& span : spans) jobs.push_back({s.staging.get() + span.piece_offset, span});
    return launch(slot, jobs);
  }

  Status scatter_device(size_t slot, const std::byte* device_piece,
                        std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    std::vector<cuda::ScatterJob> jobs;
    for (const PieceSpan& span : spans) {
      jobs.push_back({reinterpret_cast<const uint8_t*>(device_piece) + span.piece_offset, span});
    }
    return launch(slot, jobs);
  }

  Status read_device(size_t slot, const std::byte* device_src, std::span<std::byte> host) override {
    KVTIER_TRY(select());
    CudaSlot& s = *slots_[slot];
    KVTIER_TRY(cuda_status(
        cudaMemcpyAsync(host.data(), device_src, host.size(), cudaMemcpyDeviceToHost, s.stream),
        "D2H copy of a record header"));
    copied_ += host.size();
    return wait_for(s.stream, s.done, "D2H copy of a record header");
  }

  Status gather(size_t slot, std::span<std::byte> piece,
                std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    CudaSlot& s = *slots_[slot];
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(cuda_status(
          cuda::launch_gather(s.staging.get() + span.piece_offset, span, params_, s.stream),
          "gather kernel"));
      KVTIER_TRY(cuda_status(
          cudaMemcpyAsync(piece.data() + span.piece_offset, s.staging.get() + span.piece_offset,
                          span.bytes, cudaMemcpyDeviceToHost, s.stream),
          "D2H copy of a staging piece"));
      copied_ += span.bytes;
    }
    return wait_for(s.stream, s.done, "gather");
  }

  Status stage_device(size_t slot, std::byte* device_piece, std::span<const PieceSpan> spans,
                      std::span<const std::pair<uint64_t, std::span<const std::byte>>> host_parts,
                      std::span<const std::pair<uint64_t, uint64_t>> zero_parts) override {
    KVTIER_TRY(select());
    CudaSlot& s = *slots_[slot];
    auto* dst = reinterpret_cast<uint8_t*>(device_piece);
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(cuda_status(cuda::launch_gather(dst + span.piece_offset, span, params_, s.stream),
                             "gather kernel"));
    }
    for (const auto& [at, bytes] : host_parts) {
      KVTIER_TRY(cuda_status(
          cudaMemcpyAsync(dst + at, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, s.stream),
          "H2D copy of a record header"));
      copied_ += bytes.size();
    }
    for (const auto& [at, n] : zero_parts) {
      KVTIER_TRY(cuda_status(cudaMemsetAsync(dst + at, 0, n, s.stream), "clearing record padding"));
    }
    return wait_for(s.stream, s.done, "staging a piece in device memory");
  }

  Status expect_coded(std::span<const CodedSize> sizes) override {
    KVTIER_TRY(select());
    // One piece of device memory: a decode-failure flag per record, then each coded record's
    // stored bytes, decoded bytes and block table, every part 256-byte aligned.
    auto up = [](uint64_t v) { return (v + 255) & ~uint64_t{255}; };
    rooms_.assign(sizes.size(), {});
    staged_on_ = std::vector<std::atomic<uint64_t>>(sizes.size());
    uint64_t at = up(sizes.size() * sizeof(unsigned int));
    for (size_t r = 0; r < sizes.size(); ++r) {
      if (sizes[r].stored_bytes == 0) continue;
      CodedRoom& room = rooms_[r];
      room.size = sizes[r];
      room.stored_at = at;
      room.raw_at = at = up(at + sizes[r].stored_bytes);
      room.table_at = at = up(at + sizes[r].raw_bytes);
      at = up(at + codec::split16_blocks(sizes[r].raw_bytes) * sizeof(codec::Split16Block));
    }
    // The room is allocated on an idle stream, which goes back to the pool as it is when the GPU
    // has no room (the caller then decodes on the host and this transfer holds nothing of it).
    KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<CudaScratch> decoding, pool_.take_stream());
    auto room = pool_.allocate_room(at, decoding->stream);
    if (!room) {
      pool_.put_stream(std::move(decoding));
      rooms_.clear();
      return room.error();
    }
    coded_ = std::move(decoding);
    room_ = static_cast<uint8_t*>(*room);
    bad_ = reinterpret_cast<unsigned int*>(room_);
    cudaStream_t decode = coded_->stream;
    KVTIER_TRY(cuda_status(cudaMemsetAsync(bad_, 0, sizes.size() * sizeof(unsigned int), decode),
                           "cudaMemsetAsync"));
    // The slots' streams copy stored bytes into the room: after its allocation, which is ordered
    // on the decoding stream only (the pool may hand out memory whose free is still queued there).
    KVTIER_TRY(cuda_status(cudaEventRecord(coded_->event, decode), "cudaEventRecord"));
    for (const auto& s : slots_) {
      KVTIER_TRY(cuda_status(cudaStreamWaitEvent(s->stream, coded_->event, 0),
                             "ordering copies after the room's allocation"));
    }
    // Decoded records land in the target: after the caller's work, like every slot's.
    return cuda_status(cudaStreamWaitEvent(decode, scratch_->event, 0),
                       "ordering decoding after the caller's stream");
  }

  Status stage_coded(size_t slot, std::span<const std::byte> piece,
                     std::span<const PieceSpan> spans) override {
    KVTIER_TRY(select());
    CudaSlot& s = *slots_[slot];
    uint8_t* base = room_;
    for (const PieceSpan& span : spans) {
      KVTIER_TRY(
          cuda_status(cudaMemcpyAsync(base + rooms_[span.record].stored_at + span.payload_offset,
                                      piece.data() + span.piece_offset, span.bytes,
                                      cudaMemcpyHostToDevice, s.stream),
                      "H2D copy of coded bytes"));
      copied_ += span.bytes;
    }
    KVTIER_TRY(cuda_status(cudaEventRecord(s.done, s.stream), "cudaEventRecord"));
    pending_[slot] = 1;
    for (const PieceSpan& span : spans) staged_on_[span.record] |= uint64_t{1} << (slot % 64);
    return {};
  }

  Status land_coded(uint32_t record, std::span<const std::byte> head, uint64_t first_token,
                    uint32_t token_count) override {
    KVTIER_TRY(select());
    const CodedRoom& room = rooms_[record];
    // The head is the same bytes the device holds (both copied from one staging piece): checked
    // here, the decoder trusts the table.
    auto table = codec::split16_table(head, /*header_only=*/true);
    if (!table) return table.error();
    if (table->decoded_bytes != room.size.raw_bytes ||
        table->stored_bytes != room.size.stored_bytes) {
      return {ErrorCode::kCorrupt,
              fmt::format("a coded payload declares {} bytes stored as {} where its record holds "
                          "{} stored as {}",
                          table->decoded_bytes, table->stored_bytes, room.size.raw_bytes,
                          room.size.stored_bytes)};
    }
    uint8_t* base = room_;
    uint8_t* raw = base + room.raw_at;
    cudaStream_t decode = coded_->stream;
    std::lock_guard lock(decode_mu_);
    // The record's bytes were copied on the streams of the slots that staged it: after each one's
    // latest work (recorded after those copies; more than 64 slots share bits, and wait more).
    const uint64_t staged = staged_on_[record].load();
    for (size_t i = 0; i < slots_.size(); ++i) {
      if ((staged >> (i % 64) & 1) == 0) continue;
      KVTIER_TRY(cuda_status(cudaStreamWaitEvent(decode, slots_[i]->done, 0),
                             "ordering decoding after the copies"));
    }
    KVTIER_TRY(cuda_status(
        cuda::launch_split16_decode_stream(
            base + room.stored_at, static_cast<uint32_t>(table->blocks.size()),
            table->decoded_bytes, reinterpret_cast<codec::Split16Block*>(base + room.table_at), raw,
            bad_ + record, decode),
        "split16 decode kernel"));
    const cuda::ScatterJob job{raw, {0, 0, room.size.raw_bytes, first_token, token_count, record}};
    return cuda_status(cuda::launch_scatter(&job, 1, params_, sums_, decode),
                       "scatter kernel (decoded)");
  }

  std::vector<uint32_t> decode_failures() const override { return failures_; }

  Status release(size_t slot) override {
    if (pending_[slot] == 0) return {};
    KVTIER_TRY(select());
    pending_[slot] = 0;
    return cuda_status(cudaEventSynchronize(slots_[slot]->done),
                       "waiting for a staging slot's copy");
  }

  Result<std::vector<uint64_t>> finish() override {
    KVTIER_TRY(select());
    for (size_t i = 0; i < slots_.size(); ++i) KVTIER_TRY(release(i));
    // Every kernel that added to the sums is done (each slot's event waited for above, and the
    // decoding stream's below).
    if (coded_ && bad_ != nullptr) {
      std::vector<unsigned int> bad(rooms_.size());
      KVTIER_TRY(cuda_status(cudaMemcpyAsync(bad.data(), bad_, bad.size() * sizeof(unsigned int),
                                             cudaMemcpyDeviceToHost, coded_->stream),
                             "reading decode failures"));
      KVTIER_TRY(wait_for(coded_->stream, coded_->event, "decoding coded records"));
      failures_.clear();
      for (size_t r = 0; r < bad.size(); ++r) {
        if (bad[r] != 0) failures_.push_back(static_cast<uint32_t>(r));
      }
    }
    std::vector<uint64_t> out(records_);
    KVTIER_TRY(cuda_status(
        cudaMemcpyAsync(out.data(), sums_, records_ * 8, cudaMemcpyDeviceToHost, scratch_->stream),
        "reading sums"));
    KVTIER_TRY(wait_for(scratch_->stream, scratch_->event, "reading sums"));
    return out;
  }

  Result<std::vector<uint64_t>> record_sums(std::span<const RecordRange> records) override {
    KVTIER_TRY(select());
    unsigned long long* sums = record_sums_;
    DeviceBuffer more;  // only for more records than the transfer was begun with (saves never)
    if (records.size() > std::max<size_t>(records_, 1)) {
      KVTIER_ASSIGN_OR_RETURN(more, DeviceBuffer::allocate(records.size() * 8));
      sums = more.get<unsigned long long>();
    }
    cudaStream_t stream = scratch_->stream;
    KVTIER_TRY(
        cuda_status(cudaMemsetAsync(sums, 0, records.size() * 8, stream), "cudaMemsetAsync"));
    for (size_t i = 0; i < records.size(); ++i) {
      KVTIER_TRY(cuda_status(cuda::launch_record_sum(records[i].first_token, records[i].token_count,
                                                     params_, sums + i, stream),
                             "checksum kernel"));
    }
    std::vector<uint64_t> out(records.size());
    KVTIER_TRY(cuda_status(
        cudaMemcpyAsync(out.data(), sums, records.size() * 8, cudaMemcpyDeviceToHost, stream),
        "reading sums"));
    KVTIER_TRY(wait_for(stream, scratch_->event, "checksum kernel"));
    return out;
  }

  uint64_t device_copy_bytes() const override { return copied_; }

 private:
  explicit CudaTransfer(CudaPool& pool) : pool_(pool) {}

  // Worker threads call in: the current device is per thread.
  Status select() const {
    return cuda_status(cudaSetDevice(device_), fmt::format("cudaSetDevice({})", device_));
  }

  /// The scatter kernel over `jobs` on `slot`'s stream, then the slot's event: release() waits.
  Status launch(size_t slot, const std::vector<cuda::ScatterJob>& jobs) {
    CudaSlot& s = *slots_[slot];
    KVTIER_TRY(cuda_status(cuda::launch_scatter(jobs.data(), jobs.size(), params_, sums_, s.stream),
                           "scatter kernel"));
    KVTIER_TRY(cuda_status(cudaEventRecord(s.done, s.stream), "cudaEventRecord"));
    pending_[slot] = 1;
    return {};
  }

  CudaPool& pool_;
  int device_ = 0;
  KvLayoutParams params_;
  size_t records_ = 0;
  std::unique_ptr<CudaScratch> scratch_;
  unsigned long long* sums_ = nullptr;         // in scratch_
  unsigned long long* record_sums_ = nullptr;  // in scratch_
  std::vector<std::unique_ptr<CudaSlot>> slots_;
  std::vector<uint8_t>
      pending_;  // per slot: a scatter not yet waited for (bytes: per-slot threads)
  std::atomic<uint64_t> copied_{0};
  /// Where a coded record's stored bytes, decoded bytes and block table lie in coded_'s memory.
  struct CodedRoom {
    CodedSize size;
    uint64_t stored_at = 0;
    uint64_t raw_at = 0;
    uint64_t table_at = 0;
  };
  std::vector<CodedRoom> rooms_;  // per record (expect_coded)
  /// Per record, the slots (bit slot % 64) whose streams copied its stored bytes.
  std::vector<std::atomic<uint64_t>> staged_on_;
  std::unique_ptr<CudaScratch> coded_;  // the stream decoding them
  uint8_t* room_ = nullptr;             // their memory (CudaPool::allocate_room)
  unsigned int* bad_ = nullptr;         // in room_: per record, a block the decoder refused
  std::mutex decode_mu_;                // one record's waits and launches at a time
  std::vector<uint32_t> failures_;      // after finish()
};

}  // namespace

Status cuda_shape_supported(const KvLayoutParams& p) {
  // The kernels move 16-byte vectors and index tokens with 32-bit arithmetic.
  if (p.row_bytes % 16 != 0 || p.head_bytes % 16 != 0) {
    return {ErrorCode::kNotSupported, fmt::format("KV in GPU memory needs heads of a multiple of "
                                                  "16 bytes (this geometry's head is {} bytes, "
                                                  "its row {}); keep such KV in host memory",
                                                  p.head_bytes, p.row_bytes)};
  }
  if (p.capacity_tokens >= (uint64_t{1} << 31)) {
    return {ErrorCode::kNotSupported,
            "KV in GPU memory is limited to targets of fewer than 2^31 tokens"};
  }
  return {};
}

Result<std::unique_ptr<DeviceTransfer>> begin_cuda_transfer(CudaPool& pool, const KvMemory& target,
                                                            size_t records, size_t slots,
                                                            size_t slot_bytes) {
  KVTIER_ASSIGN_OR_RETURN(auto t, CudaTransfer::create(pool, target, records, slots, slot_bytes));
  return std::unique_ptr<DeviceTransfer>(std::move(t));
}

}  // namespace kvtier
