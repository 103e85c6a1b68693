// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include <atomic>
#include <cstring>
#include <mutex>

#include "common/checksum.hpp"
#include "device/device.hpp"

namespace kvtier {
namespace {

/// Calls fn(target_address, payload_offset, bytes) for the runs of payload bytes [q, q + n) of a
/// record of `count` tokens starting at `first_token`: each run is contiguous in the target.
template <typename Fn>
void for_each_run(const KvLayoutParams& p, uint64_t first_token, uint64_t count, uint64_t q,
                  uint64_t n, Fn&& fn) {
  const uint64_t run = contiguous_run(p);
  while (n > 0) {
    const PayloadPos pos = payload_pos(p, count, q);
    // In the contiguous form a whole (K|V, layer) block of the record is one run when the record
    // holds whole target rows.
    const uint64_t left = p.form == KvForm::kContiguous && target_row(p) == p.row_bytes
                              ? (count - pos.token) * p.row_bytes - pos.col
                              : run - pos.col % run;
    const uint64_t len = std::min(n, left);
    fn(kv_address(p, pos.kv, pos.layer, first_token + pos.token, pos.col), q, len);
    q += len;
    n -= len;
  }
}

class HostTransfer final : public DeviceTransfer {
 public:
  HostTransfer(const KvMemory& target, size_t records) : target_(target), sums_(records) {
    params_ = target_.params;
    params_.layer_base = target_.layer_base.data();
    params_.block_table = target_.block_table.data();
  }

  Status scatter(size_t, std::span<const std::byte> piece,
                 std::span<const PieceSpan> spans) override {
    // Checksum terms are 8-byte words of the payload: runs that split words (a packed layout's
    // head of, say, 100 bytes) are summed over the span as one range and copied apart.
    const bool whole_words = contiguous_run(params_) % 8 == 0;
    for (const PieceSpan& s : spans) {
      uint64_t sum = 0;
      if (!whole_words) {
        const std::byte* src = piece.data() + s.piece_offset;
        sums_[s.record] += kvsum::partial(src, s.bytes, s.payload_offset / 8);
        for_each_run(params_, s.first_token, s.token_count, s.payload_offset, s.bytes,
                     [&](uint8_t* dst, uint64_t q, uint64_t len) {
                       if (dst == nullptr) return;  // a skipped block: verified, not written
                       copied_ += len;
                       std::memcpy(dst, src + (q - s.payload_offset), len);
                     });
        continue;
      }
      for_each_run(params_, s.first_token, s.token_count, s.payload_offset, s.bytes,
                   [&](uint8_t* dst, uint64_t q, uint64_t len) {
                     const std::byte* src = piece.data() + s.piece_offset + (q - s.payload_offset);
                     if (dst == nullptr) {  // a skipped block: verified, not written
                       sum += kvsum::partial(src, len, q / 8);
                       return;
                     }
                     copied_ += len;
                     sum += kvsum::copy_partial(reinterpret_cast<std::byte*>(dst), src, len, q / 8);
                   });
      sums_[s.record] += sum;
    }
    return {};
  }

  Status gather(size_t, std::span<std::byte> piece, std::span<const PieceSpan> spans) override {
    for (const PieceSpan& s : spans) {
      for_each_run(params_, s.first_token, s.token_count, s.payload_offset, s.bytes,
                   [&](uint8_t* src, uint64_t q, uint64_t len) {
                     std::memcpy(piece.data() + s.piece_offset + (q - s.payload_offset), src, len);
                   });
    }
    return {};
  }

  Status release(size_t) override { return {}; }

  uint64_t host_memory_bytes() const override { return 2 * copied_; }

  Result<std::vector<uint64_t>> finish() override {
    std::vector<uint64_t> out(sums_.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = sums_[i];
    return out;
  }

  Result<std::vector<uint64_t>> record_sums(std::span<const RecordRange> records) override {
    std::vector<uint64_t> out;
    std::vector<std::byte> payload;  // runs that split words are gathered first (see scatter)
    const bool whole_words = contiguous_run(params_) % 8 == 0;
    for (const RecordRange& r : records) {
      const uint64_t bytes =
          uint64_t{params_.kv_tensors} * params_.layers * r.token_count * params_.row_bytes;
      uint64_t sum = 0;
      if (!whole_words) payload.resize(bytes);
      for_each_run(params_, r.first_token, r.token_count, 0, bytes,
                   [&](uint8_t* src, uint64_t q, uint64_t len) {
                     const auto* from = reinterpret_cast<const std::byte*>(src);
                     if (whole_words)
                       sum += kvsum::partial(from, len, q / 8);
                     else
                       std::memcpy(payload.data() + q, from, len);
                   });
      out.push_back(whole_words ? sum : kvsum::partial(payload.data(), bytes, 0));
    }
    return out;
  }

 private:
  KvMemory target_;
  KvLayoutParams params_;
  std::vector<std::atomic<uint64_t>> sums_;  // pieces of one record may land on different threads
  std::atomic<uint64_t> copied_{0};
};

class HostDevice final : public Device {
 public:
  std::string_view name() const override { return "host-emulated"; }
  bool accepts(MemoryKind kind) const override { return kind == MemoryKind::kHost; }
  Result<std::unique_ptr<DeviceTransfer>> begin(const KvMemory& target, size_t records, size_t,
                                                size_t) override {
    return std::unique_ptr<DeviceTransfer>(std::make_unique<HostTransfer>(target, records));
  }
};

std::mutex& wrapper_mutex() {
  static std::mutex mu;
  return mu;
}

HostDeviceWrapper& wrapper() {
  static HostDeviceWrapper wrap;  // guarded by wrapper_mutex()
  return wrap;
}

}  // namespace

void set_host_device_wrapper_for_testing(HostDeviceWrapper wrap) {
  std::lock_guard lock(wrapper_mutex());
  wrapper() = std::move(wrap);
}

std::unique_ptr<Device> make_host_device() {
  std::unique_ptr<Device> device = std::make_unique<HostDevice>();
  std::lock_guard lock(wrapper_mutex());
  return wrapper() ? wrapper()(std::move(device)) : std::move(device);
}

}  // namespace kvtier
