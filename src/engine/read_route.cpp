// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one read route every tier's bytes go through: plan the records into pieces, lease staging,
// begin a device transfer, let the channel read, check headers and checksums as pieces arrive,
// scatter payloads into the destination (verified where they land), account.
#include "engine/read_route.hpp"

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "api/try.hpp"
#include "codec/split16_format.hpp"
#include "engine/record_codec.hpp"
#include "engine/record_io.hpp"

namespace kvtier {
namespace {

/// The records of a read in token order, their first tokens, the files they are in (none for
/// images in memory) and the pieces a channel hands over.
struct ReadPlan {
  std::vector<RecordMeta> records;
  std::vector<uint64_t> first_tokens;
  std::vector<ChannelFile> files;
  IoPlan io;
  std::vector<CodedSize> coded;  // per record; stored_bytes 0 where it is stored raw
  bool any_coded = false;
  uint64_t slot_bytes = 0;  // a staging slot's

  /// `firsts` gives each record's first token; empty means record i starts at i * chunk_tokens.
  ReadPlan(std::span<const LocatedRecord> located, const RecordShape& shape, uint64_t piece_bytes,
           std::span<const uint64_t> firsts)
      : slot_bytes(piece_bytes) {
    std::vector<int> fds;
    for (size_t i = 0; i < located.size(); ++i) {
      const RecordMeta& m = located[i].meta;
      records.push_back(m);
      first_tokens.push_back(firsts.empty() ? i * uint64_t{shape.geometry.chunk_tokens}
                                            : firsts[i]);
      if (located[i].file) fds.push_back(located[i].file->fd.get());
      const bool is = is_coded(m, shape);
      coded.push_back(is ? CodedSize{m.payload_bytes, raw_payload_bytes(shape, m.token_count)}
                         : CodedSize{});
      any_coded = any_coded || is;
    }
    files = channel_files(located);
    io = fds.size() == records.size() && !records.empty() ? plan_io(records, fds, piece_bytes)
                                                          : plan_images(records, piece_bytes);
  }

  /// An outcome sized for these records.
  void start(ReadOutcome& out) const {
    out.size_for(records.size());
    // A coded record's sum covers its decoded payload, which arrives all at once when it lands.
    for (size_t r = 0; r < records.size(); ++r)
      out.payload[r] = coded[r].stored_bytes > 0 ? coded[r].raw_bytes : records[r].payload_bytes;
    out.bytes = io.bytes;
    out.extents = io.extents;
  }
};

}  // namespace

unsigned consumer_threads(bool device, size_t slots, std::optional<uint32_t> set) {
  if (set) return *set;
  const unsigned cores = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  if (!device) return cores;
  constexpr size_t kMostDeviceConsumers = 64;
  return static_cast<unsigned>(std::clamp<size_t>(slots, cores, kMostDeviceConsumers));
}

namespace {

/// The coded records of a read (Options::compression) on their way to landing: the bytes of each
/// not yet consumed, and what is held of it on the host: its stream's head where the device
/// decodes, else its whole stored payload, decoded by the consumer thread that completes it.
/// Thread-safe.
class CodedLanding {
 public:
  CodedLanding(const ReadPlan& read, bool device) : read_(read), device_(device) {
    left_ = std::vector<std::atomic<uint64_t>>(read.records.size());
    held_.resize(read.records.size());
    for (size_t r = 0; r < read.records.size(); ++r) {
      if (read.coded[r].stored_bytes > 0) left_[r] = kBlock + read.coded[r].stored_bytes;
    }
  }

  [[nodiscard]] bool device() const { return device_; }
  [[nodiscard]] bool coded(size_t r) const { return read_.coded[r].stored_bytes > 0; }

  /// Keeps what the host needs of stored bytes [at, at + bytes.size()) of record `r`.
  void hold(size_t r, uint64_t at, std::span<const std::byte> bytes) {
    const uint64_t keep = held_bytes(r);
    if (at >= keep) return;
    std::memcpy(room(r) + at, bytes.data(), std::min<uint64_t>(bytes.size(), keep - at));
  }

  /// Counts `bytes` of record `r` (header block or stored payload) consumed; true for the call
  /// that consumed its last.
  [[nodiscard]] bool consumed(size_t r, uint64_t bytes) {
    return left_[r].fetch_sub(bytes, std::memory_order_acq_rel) == bytes;
  }

  /// What is held of record `r`; let go with release().
  [[nodiscard]] std::span<const std::byte> held(size_t r) {
    std::lock_guard lock(mu_);
    return {held_[r].get(), held_bytes(r)};
  }
  void release(size_t r) {
    std::lock_guard lock(mu_);
    held_[r].reset();
  }

 private:
  // Made when the record's first bytes arrive and let go when it lands, so a read holds only the
  // records its pieces in flight touch.
  std::byte* room(size_t r) {
    std::lock_guard lock(mu_);
    if (!held_[r]) held_[r] = std::make_unique_for_overwrite<std::byte[]>(held_bytes(r));
    return held_[r].get();
  }

  [[nodiscard]] uint64_t held_bytes(size_t r) const {
    const CodedSize& size = read_.coded[r];
    return device_ ? std::min(codec::split16_head_bytes(size.raw_bytes), size.stored_bytes)
                   : size.stored_bytes;
  }

  const ReadPlan& read_;
  const bool device_;
  std::vector<std::atomic<uint64_t>> left_;
  std::mutex mu_;
  // Guarded by mu_; the bytes by whoever writes them (disjoint ranges, then the one that lands).
  std::vector<std::unique_ptr<std::byte[]>> held_;
};

/// Checks headers and sums payloads; with a destination, the device scatters payloads into it and
/// sums them there (where the data lands), else they are summed here. What tier the bytes belong
/// to makes no difference: every piece is part of record images, read from where the channel's
/// staging is (host memory in place, device buffers copied back for headers). Coded records are
/// staged whole, then decoded and landed (CodedLanding): their checksum is the decoded bytes'.
class ScatterSink final : public PieceSink {
 public:
  ScatterSink(const ReadPlan& read, DeviceTransfer* transfer, Residency residency,
              const RecordShape& shape, ReadOutcome& out, const ProgressFn& progress,
              std::span<const std::span<std::byte>> keep, CodedLanding* coded)
      : read_(read),
        transfer_(transfer),
        residency_(residency),
        shape_(shape),
        out_(out),
        progress_(progress),
        keep_(keep),
        coded_(coded) {}

  Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
    Regions regions;
    Status st;
    for_each_region(read_.io, read_.records, index,
                    [&](size_t r, Region region, uint64_t at, uint64_t in, uint64_t n) {
                      if (st.ok())
                        st = classify(r, region, at, in, slot, data.subspan(in, n), regions);
                    });
    KVTIER_TRY(st);
    if (transfer_ == nullptr) {
      for (const PieceSpan& sp : regions.raw) {
        out_.sums[sp.record] +=
            kvsum::partial(data.data() + sp.piece_offset, sp.bytes, sp.payload_offset / 8);
      }
    } else if (!regions.raw.empty()) {
      st = residency_ == Residency::kDevice
               ? transfer_->scatter_device(slot, data.data(), regions.raw)
               : transfer_->scatter(slot, data, regions.raw);
    }
    if (st.ok() && !regions.coded.empty()) st = transfer_->stage_coded(slot, data, regions.coded);
    // A coded record lands once all its bytes are consumed (and, on a device, staged).
    for (const auto& [r, n] : regions.consumed) {
      if (st.ok() && coded_->consumed(r, n)) st = land(r, slot);
    }
    advance(data.size());
    return st;
  }

  Status release(size_t slot) override {
    return transfer_ == nullptr ? Status() : transfer_->release(slot);
  }

  void account(const SlotTimes& times) override {
    std::lock_guard lock(times_mu_);
    times_ += times;
  }
  [[nodiscard]] SlotTimes slot_times() {
    std::lock_guard lock(times_mu_);
    return times_;
  }

 private:
  /// What one piece holds: payload spans of raw records, stored spans of coded records a device
  /// decodes, and the bytes of coded records consumed.
  struct Regions {
    std::vector<PieceSpan> raw;
    std::vector<PieceSpan> coded;
    std::vector<std::pair<size_t, uint64_t>> consumed;
  };

  /// One region of record `r` (`at` into it, `in` into the piece): a header is checked (an error
  /// reading it back is an error to report, not evidence against the record), a payload counted and
  /// listed in `regions`.
  Status classify(size_t r, Region region, uint64_t at, uint64_t in, size_t slot,
                  std::span<const std::byte> bytes, Regions& regions) {
    if (region == Region::kPadding) return {};
    const bool coded = coded_ != nullptr && coded_->coded(r);
    if (coded) regions.consumed.emplace_back(r, bytes.size());
    if (region == Region::kHeader) {
      alignas(8) std::byte header[kBlock];
      std::span<const std::byte> block = bytes;
      if (residency_ == Residency::kDevice) {
        KVTIER_TRY(transfer_->read_device(slot, bytes.data(), std::span(header, bytes.size())));
        block = std::span<const std::byte>(header, bytes.size());
      }
      const HeaderCheck check = at == 0 && block.size() == kBlock
                                    ? check_header(block, read_.records[r], shape_)
                                    : HeaderCheck::kDiffers;
      // A codec this build does not decode leaves the header unseen: a miss, the record kept for
      // a build that does.
      if (check == HeaderCheck::kNotDecoded) return {};
      const bool good = check == HeaderCheck::kMatches;
      out_.header[r] = good ? HeaderState::kGood : HeaderState::kBad;
      if (!keep_.empty() && good) std::memcpy(keep_[r].data(), block.data(), kBlock);
      return {};
    }
    if (!coded) out_.received[r] += bytes.size();
    if (!keep_.empty()) std::memcpy(keep_[r].data() + kBlock + at, bytes.data(), bytes.size());
    const PieceSpan span{in,
                         at,
                         bytes.size(),
                         read_.first_tokens[r],
                         read_.records[r].token_count,
                         static_cast<uint32_t>(r)};
    if (!coded) {
      regions.raw.push_back(span);
      return {};
    }
    coded_->hold(r, at, bytes);
    if (coded_->device()) regions.coded.push_back(span);
    return {};
  }

  /// Decodes coded record `r`, all of it consumed, and lands it where raw records land; damage of
  /// any kind found on the way marks it corrupt (a miss, the record dropped).
  Status land(size_t r, size_t slot) {
    const CodedSize size = read_.coded[r];
    const uint64_t first = read_.first_tokens[r];
    const uint32_t tokens = read_.records[r].token_count;
    if (out_.header[r] != HeaderState::kGood) {
      coded_->release(r);
      return {};
    }
    if (coded_->device()) {
      const Status st =
          transfer_->land_coded(static_cast<uint32_t>(r), coded_->held(r), first, tokens);
      coded_->release(r);
      if (st.code() == ErrorCode::kCorrupt) {
        out_.header[r] = HeaderState::kBad;
        return {};
      }
      KVTIER_TRY(st);
    } else {
      const auto memory = std::make_unique_for_overwrite<std::byte[]>(size.raw_bytes);
      const std::span<std::byte> raw(memory.get(), size.raw_bytes);
      const Status decoded = decode_payload(coded_->held(r), raw);
      coded_->release(r);
      if (!decoded.ok()) {
        out_.header[r] = HeaderState::kBad;
        return {};
      }
      if (transfer_ == nullptr) {
        out_.sums[r] += kvsum::partial(raw.data(), raw.size(), 0);
      } else {
        // A staging slot's worth at a time, as a device stages what it is handed; `raw` goes
        // with this call, so each part is waited for.
        for (uint64_t at = 0; at < raw.size(); at += read_.slot_bytes) {
          const uint64_t n = std::min<uint64_t>(read_.slot_bytes, raw.size() - at);
          const PieceSpan part{0, at, n, first, tokens, static_cast<uint32_t>(r)};
          KVTIER_TRY(transfer_->scatter(slot, raw.subspan(at, n), std::span(&part, 1)));
          KVTIER_TRY(transfer_->release(slot));
        }
      }
    }
    // Landed: its sum covers the decoded payload. A record that never lands (an error stopped the
    // read) stays incomplete, no evidence against it.
    out_.received[r] = size.raw_bytes;
    return {};
  }

  void advance(uint64_t bytes) {
    const uint64_t done = done_ += bytes;
    if (progress_) {
      std::lock_guard lock(progress_mu_);
      progress_(done, read_.io.bytes);
    }
  }

  const ReadPlan& read_;
  DeviceTransfer* transfer_;
  Residency residency_;
  const RecordShape& shape_;
  ReadOutcome& out_;
  const ProgressFn& progress_;
  std::span<const std::span<std::byte>> keep_;
  CodedLanding* coded_;
  std::mutex progress_mu_;
  std::atomic<uint64_t> done_{0};
  std::mutex times_mu_;
  SlotTimes times_;  // guarded by times_mu_
};

}  // namespace

std::vector<ChannelFile> channel_files(std::span<const LocatedRecord> records) {
  std::vector<ChannelFile> files;
  std::unordered_set<int> seen;
  for (const LocatedRecord& r : records) {
    if (!r.file || !seen.insert(r.file->fd.get()).second) continue;
    files.push_back({r.file->fd.get(), r.file->path, r.file->drive, r.file});
  }
  return files;
}

Result<ReadOutcome> ReadRoute::read(Channel& channel, std::span<const LocatedRecord> located,
                                    const KvMemory* destination,
                                    std::span<const uint64_t> first_tokens,
                                    const ProgressFn& progress,
                                    std::span<const std::span<std::byte>> keep) {
  std::vector<size_t> coded;
  for (size_t i = 0; i < located.size(); ++i) {
    if (is_coded(located[i].meta, shape_)) coded.push_back(i);
  }
  if (coded.empty())
    return read_stored(channel, located, destination, first_tokens, progress, keep);
  return read_coded(channel, located, coded, destination, first_tokens, progress, keep);
}

Result<ReadOutcome> ReadRoute::read_stored(Channel& channel, std::span<const LocatedRecord> located,
                                           const KvMemory* destination,
                                           std::span<const uint64_t> first_tokens,
                                           const ProgressFn& progress,
                                           std::span<const std::span<std::byte>> keep) {
  KVTIER_EXPECTS(destination != nullptr || channel.residency() == Residency::kHost,
                 fmt::format("a {} channel needs a destination", channel.name()));
  StagingPool& staging = channel.staging();
  const ReadPlan read(located, shape_, staging.slot_bytes(), first_tokens);
  KVTIER_EXPECTS(!read.any_coded || channel.residency() == Residency::kHost,
                 fmt::format("coded records are read through host memory, not {}", channel.name()));
  KVTIER_TRY(channel.prepare(read.files));
  ReadOutcome out;
  read.start(out);
  // This read's share of the channel's staging, handed back down to an equal share while other
  // operations wait.
  StagingPool::Lease lease = staging.acquire(read.io.pieces.size());
  std::unique_ptr<DeviceTransfer> transfer;
  if (destination != nullptr) {
    auto device = kit_.device_for(destination->kind);
    auto begun = device ? (*device)->begin(*destination, read.records.size(), lease.slots().size(),
                                           staging.slot_bytes())
                        : fail(device.error());
    if (!begun) {
      out.status = begun.error();
      return out;
    }
    transfer = std::move(*begun);
  }
  std::optional<CodedLanding> coded;
  if (read.any_coded) {
    // A device that decodes takes the stored bytes; the host decodes for the others.
    const Status on_device =
        transfer ? transfer->expect_coded(read.coded) : Status(ErrorCode::kNotSupported, "");
    if (!on_device.ok() && on_device.code() != ErrorCode::kNotSupported) {
      out.status = on_device;
      return out;
    }
    coded.emplace(read, on_device.ok());
  }
  ScatterSink sink(read, transfer.get(), channel.residency(), shape_, out, progress, keep,
                   coded ? &*coded : nullptr);
  const bool device = destination != nullptr && destination->kind != MemoryKind::kHost;
  out.status = channel.read(read.files, read.io.pieces, lease, sink,
                            consumer_threads(device, lease.slots().size(), consumer_threads_));
  out.host_bytes = channel.host_bytes(read.io.bytes);
  const SlotTimes slots = sink.slot_times();
  counters_.read_slot_ns += slots.total;
  counters_.read_slot_reading_ns += slots.reading;
  counters_.read_slot_queued_ns += slots.queued;
  counters_.read_slot_consuming_ns += slots.consuming;
  counters_.read_slot_device_wait_ns += slots.device_wait;
  counters_.read_slot_refill_wait_ns += slots.refill_wait;
  if (transfer) {
    out.absorb(*transfer);
    counters_.device_copy_bytes += transfer->device_copy_bytes();
    out.host_bytes += transfer->host_memory_bytes();
  }
  return out;
}

namespace {

/// The records at `index` of `all` (and of `values` when it is not empty).
template <typename T>
std::vector<T> pick(std::span<const T> values, std::span<const size_t> index) {
  std::vector<T> out;
  if (values.empty()) return out;
  for (size_t i : index) out.push_back(values[i]);
  return out;
}

/// Records `index` of a memory channel's images, as a channel of their own: a read of some of the
/// records a tier handed over plans its pieces by their places in that read (image k), which are
/// `index[k]` in the channel.
class ImageSubset final : public Channel {
 public:
  ImageSubset(Channel& images, std::span<const size_t> index)
      : images_(images), index_(index.begin(), index.end()) {}
  std::string_view name() const override { return images_.name(); }
  StagingPool& staging() override { return images_.staging(); }
  Residency residency() const override { return images_.residency(); }
  Status read(std::span<const ChannelFile> files, std::span<const Piece> pieces,
              StagingPool::Lease& lease, PieceSink& sink, unsigned workers) override {
    std::vector<Piece> mapped(pieces.begin(), pieces.end());
    for (Piece& p : mapped) {
      KVTIER_EXPECTS(p.fd >= 0 && static_cast<size_t>(p.fd) < index_.size(),
                     "a piece of an image outside the subset");
      p.fd = static_cast<int>(index_[static_cast<size_t>(p.fd)]);
    }
    return images_.read(files, mapped, lease, sink, workers);
  }
  Status write(std::span<const ChannelFile>, std::span<const Piece>, StagingPool::Lease&,
               PieceSink&) override {
    return {ErrorCode::kNotSupported, "record images in host memory are read, not written, here"};
  }
  uint64_t host_bytes(uint64_t bytes) const override { return images_.host_bytes(bytes); }

 private:
  Channel& images_;
  std::vector<size_t> index_;
};

/// Copies record `from` of `part` into record `to` of `out`.
void take(ReadOutcome& out, size_t to, const ReadOutcome& part, size_t from) {
  out.sums[to] = part.sums[from].load();
  out.received[to] = part.received[from].load();
  out.header[to] = part.header[from];
  out.payload[to] = part.payload[from];
}

/// Adds what a part of a read moved and the first error it met.
void add(ReadOutcome& out, const ReadOutcome& part) {
  if (out.status.ok()) out.status = part.status;
  out.bytes += part.bytes;
  out.extents += part.extents;
  out.host_bytes += part.host_bytes;
}

}  // namespace

Result<ReadOutcome> ReadRoute::read_coded(Channel& channel, std::span<const LocatedRecord> located,
                                          std::span<const size_t> coded,
                                          const KvMemory* destination,
                                          std::span<const uint64_t> first_tokens,
                                          const ProgressFn& progress,
                                          std::span<const std::span<std::byte>> keep) {
  const size_t n = located.size();
  std::vector<uint64_t> firsts(first_tokens.begin(), first_tokens.end());
  if (firsts.empty()) {
    for (size_t i = 0; i < n; ++i) firsts.push_back(i * uint64_t{shape_.geometry.chunk_tokens});
  }
  ReadOutcome out;
  out.size_for(n);
  // Progress over the parts read one after another: the bytes of the parts before, against the
  // whole read's record images.
  uint64_t total = 0, before = 0;
  for (const LocatedRecord& r : located) total += r.meta.end() - r.meta.offset;
  const ProgressFn report = !progress ? ProgressFn{} : [&](uint64_t done, uint64_t) {
    progress(std::min(total, before + done), total);
  };
  // Reads `index` of the records through `through`, into `out`.
  auto read_part = [&](Channel& through, std::span<const size_t> index) -> Status {
    const std::vector<LocatedRecord> records = pick(located, index);
    ImageSubset subset(through, index);
    Channel& from = records.front().file ? through : subset;
    KVTIER_ASSIGN_OR_RETURN(
        ReadOutcome part,
        read_stored(from, records, destination, pick(std::span<const uint64_t>(firsts), index),
                    report, pick(keep, index)));
    for (size_t k = 0; k < index.size(); ++k) take(out, index[k], part, k);
    add(out, part);
    before += part.bytes;
    return {};
  };
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  std::span<const size_t> rest = all;
  if (channel.residency() == Residency::kDevice) {
    // A channel into device memory (GPUDirect Storage) reads the raw records; the coded ones go
    // through host memory, where their heads are read.
    std::vector<size_t> stored;
    for (size_t i = 0, c = 0; i < n; ++i) {
      if (c < coded.size() && coded[c] == i) {
        ++c;
      } else {
        stored.push_back(i);
      }
    }
    if (!stored.empty()) KVTIER_TRY(read_part(channel, stored));
    rest = coded;
  }
  Channel& host = channel.residency() == Residency::kHost ? channel : kit_.posix_channel();
  // Into device memory, runs whose coded records decode to at most coded_run_bytes_: the room the
  // device holds for their stored and decoded payloads stays bounded whatever the session's
  // length. Each run takes its share of every drive's records (spread_runs), so that all drives
  // read at once. The host holds only the records its pieces in flight touch: one run.
  const bool device = destination != nullptr && destination->kind != MemoryKind::kHost;
  if (!device) {
    if (!rest.empty()) KVTIER_TRY(read_part(host, rest));
    return out;
  }
  std::vector<uint32_t> drive(rest.size());
  std::vector<uint64_t> decoded(rest.size());
  for (size_t k = 0; k < rest.size(); ++k) {
    const LocatedRecord& r = located[rest[k]];
    drive[k] = r.file ? r.file->drive : 0;
    decoded[k] = is_coded(r.meta, shape_) ? raw_payload_bytes(shape_, r.meta.token_count) : 0;
  }
  for (const std::vector<size_t>& run : spread_runs(drive, decoded, coded_run_bytes_)) {
    std::vector<size_t> index(run.size());
    for (size_t k = 0; k < run.size(); ++k) index[k] = rest[run[k]];
    KVTIER_TRY(read_part(host, index));
  }
  return out;
}

Result<ReadOutcome> ReadRoute::read_images(std::span<const LocatedRecord> records,
                                           std::vector<std::span<const std::byte>> images,
                                           std::span<const uint64_t> first_tokens,
                                           const KvMemory& destination) {
  const std::unique_ptr<Channel> channel = make_memory_channel(kit_.staging(), std::move(images));
  return read(*channel, records, &destination, first_tokens);
}

}  // namespace kvtier
