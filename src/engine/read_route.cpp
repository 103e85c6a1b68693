// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one read route every tier's bytes go through: plan the records into pieces, lease staging,
// begin a device transfer, let the channel read, check headers and checksums as pieces arrive,
// scatter payloads into the destination (verified where they land), account.
#include "engine/read_route.hpp"

#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"
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

  /// `firsts` gives each record's first token; empty means record i starts at i * chunk_tokens.
  ReadPlan(std::span<const LocatedRecord> located, uint32_t chunk_tokens, uint64_t piece_bytes,
           std::span<const uint64_t> firsts) {
    std::vector<int> fds;
    for (size_t i = 0; i < located.size(); ++i) {
      records.push_back(located[i].meta);
      first_tokens.push_back(firsts.empty() ? i * uint64_t{chunk_tokens} : firsts[i]);
      if (located[i].file) fds.push_back(located[i].file->fd.get());
    }
    files = channel_files(located);
    io = fds.size() == records.size() && !records.empty() ? plan_io(records, fds, piece_bytes)
                                                          : plan_images(records, piece_bytes);
  }

  /// An outcome sized for these records.
  void start(ReadOutcome& out) const {
    out.size_for(records.size());
    for (size_t r = 0; r < records.size(); ++r) out.payload[r] = records[r].payload_bytes;
    out.bytes = io.bytes;
    out.extents = io.extents;
  }
};

// Checksumming and scattering a piece costs more CPU than reading it: spread it over the cores
// (the I/O thread mostly sleeps in the kernel).
unsigned consumer_threads() { return std::clamp(std::thread::hardware_concurrency(), 1u, 4u); }

/// Checks headers and sums payloads; with a destination, the device scatters payloads into it and
/// sums them there (where the data lands), else they are summed here. What tier the bytes belong
/// to makes no difference: every piece is part of record images, read from where the channel's
/// staging is (host memory in place, device buffers copied back for headers).
class ScatterSink final : public PieceSink {
 public:
  ScatterSink(const ReadPlan& read, DeviceTransfer* transfer, Residency residency,
              const RecordShape& shape, ReadOutcome& out, const ProgressFn& progress,
              std::span<const std::span<std::byte>> keep, bool sums)
      : read_(read),
        transfer_(transfer),
        residency_(residency),
        shape_(shape),
        out_(out),
        progress_(progress),
        keep_(keep),
        sums_(sums) {}

  Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
    std::vector<PieceSpan> spans;
    Status st;
    for_each_region(read_.io, read_.records, index,
                    [&](size_t r, Region region, uint64_t at, uint64_t in, uint64_t n) {
                      if (st.ok())
                        st = classify(r, region, at, in, slot, data.subspan(in, n), spans);
                    });
    KVTIER_TRY(st);
    if (transfer_ == nullptr) {
      for (const PieceSpan& sp : spans) {
        if (!sums_) break;
        out_.sums[sp.record] +=
            kvsum::partial(data.data() + sp.piece_offset, sp.bytes, sp.payload_offset / 8);
      }
    } else if (!spans.empty()) {
      st = residency_ == Residency::kDevice ? transfer_->scatter_device(slot, data.data(), spans)
                                            : transfer_->scatter(slot, data, spans);
    }
    advance(data.size());
    return st;
  }

  Status release(size_t slot) override {
    return transfer_ == nullptr ? Status() : transfer_->release(slot);
  }

 private:
  /// One region of record `r` (`at` into it, `in` into the piece): a header is checked (an error
  /// reading it back is an error to report, not evidence against the record), a payload counted and
  /// listed in `spans`.
  Status classify(size_t r, Region region, uint64_t at, uint64_t in, size_t slot,
                  std::span<const std::byte> bytes, std::vector<PieceSpan>& spans) {
    if (region == Region::kPadding) return {};
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
    out_.received[r] += bytes.size();
    if (!keep_.empty()) std::memcpy(keep_[r].data() + kBlock + at, bytes.data(), bytes.size());
    spans.push_back({in, at, bytes.size(), read_.first_tokens[r], read_.records[r].token_count,
                     static_cast<uint32_t>(r)});
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
  bool sums_;
  std::mutex progress_mu_;
  std::atomic<uint64_t> done_{0};
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
                                           std::span<const std::span<std::byte>> keep, bool sums) {
  KVTIER_EXPECTS(destination != nullptr || channel.residency() == Residency::kHost,
                 fmt::format("a {} channel needs a destination", channel.name()));
  StagingPool& staging = channel.staging();
  const ReadPlan read(located, shape_.geometry.chunk_tokens, staging.slot_bytes(), first_tokens);
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
  ScatterSink sink(read, transfer.get(), channel.residency(), shape_, out, progress, keep, sums);
  out.status = channel.read(read.files, read.io.pieces, lease, sink, consumer_threads());
  out.host_bytes = channel.host_bytes(read.io.bytes);
  if (transfer) {
    out.absorb(*transfer);
    device_copy_bytes_ += transfer->device_copy_bytes();
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
  std::vector<size_t> stored;
  for (size_t i = 0, c = 0; i < n; ++i) {
    if (c < coded.size() && coded[c] == i) {
      ++c;
    } else {
      stored.push_back(i);
    }
  }
  ReadOutcome out;
  out.size_for(n);
  if (!stored.empty()) {
    const std::vector<LocatedRecord> records = pick(located, stored);
    const std::vector<std::span<std::byte>> kept = pick(keep, stored);
    ImageSubset subset(channel, stored);
    Channel& from = records.front().file ? channel : subset;
    KVTIER_ASSIGN_OR_RETURN(
        ReadOutcome part,
        read_stored(from, records, destination, pick(std::span<const uint64_t>(firsts), stored),
                    progress, kept));
    for (size_t k = 0; k < stored.size(); ++k) take(out, stored[k], part, k);
    add(out, part);
  }
  // The coded ones a staging's worth of raw bytes at a time, so the host memory a restore holds
  // for decoding stays bounded whatever the session's length.
  for (size_t first = 0; first < coded.size();) {
    const size_t end = staging_run_end(first, coded.size(), kit_.staging().bytes(), [&](size_t k) {
      return raw_payload_bytes(shape_, located[coded[k]].meta.token_count);
    });
    KVTIER_TRY(read_coded_batch(channel, located, coded.subspan(first, end - first), destination,
                                firsts, keep, out));
    first = end;
  }
  return out;
}

Status ReadRoute::read_coded_batch(Channel& channel, std::span<const LocatedRecord> located,
                                   std::span<const size_t> coded, const KvMemory* destination,
                                   std::span<const uint64_t> firsts,
                                   std::span<const std::span<std::byte>> keep, ReadOutcome& out) {
  // Their images (header block, stored payload) in host memory: the caller's buffers where it
  // keeps them (a move between tiers keeps what is stored), else buffers here.
  std::vector<LocatedRecord> records = pick(located, coded);
  std::vector<AlignedBuffer> own;
  std::vector<std::span<std::byte>> images = pick(keep, coded);
  if (images.empty()) {
    for (const LocatedRecord& r : records)
      images.push_back(own.emplace_back(kBlock + r.meta.payload_bytes).span());
  }
  ImageSubset subset(channel, coded);
  Channel& host = !records.front().file                     ? subset
                  : channel.residency() == Residency::kHost ? channel
                                                            : kit_.posix_channel();
  // No sums of the stored bytes: the checksum is the decoded bytes', taken where they land.
  KVTIER_ASSIGN_OR_RETURN(ReadOutcome read,
                          read_stored(host, records, nullptr, {}, {}, images, /*sums=*/false));
  add(out, read);
  // Each one read whole with the index's header is decoded into a raw image, whose header states
  // the raw payload: from there it is read like any raw record.
  std::vector<size_t> whole;
  std::vector<LocatedRecord> raw_records;
  std::vector<AlignedBuffer> raw_images;  // every byte written below: header, decoded payload
  std::vector<std::span<const std::byte>> stored;
  for (size_t k = 0; k < coded.size(); ++k) {
    const size_t i = coded[k];
    out.header[i] = read.header[k];
    out.payload[i] = records[k].meta.payload_bytes;
    if (read.header[k] != HeaderState::kGood || read.received[k] != records[k].meta.payload_bytes)
      continue;  // as read: corrupt, or incomplete
    RecordMeta raw = records[k].meta;
    raw.payload_bytes = raw_payload_bytes(shape_, raw.token_count);
    whole.push_back(k);
    raw_records.push_back({raw, nullptr});
    raw_images.emplace_back(kBlock + raw.payload_bytes);
    stored.push_back(std::span<const std::byte>(images[k]).subspan(kBlock));
  }
  std::vector<std::span<std::byte>> payloads;
  for (auto& image : raw_images) payloads.push_back(image.span().subspan(kBlock));
  const std::vector<Status> decoded = decode_payloads(stored, payloads);
  std::vector<size_t> landing;
  std::vector<LocatedRecord> land_records;
  std::vector<std::span<const std::byte>> land_images;
  for (size_t j = 0; j < whole.size(); ++j) {
    const size_t i = coded[whole[j]];
    if (!decoded[j].ok()) {
      out.header[i] = HeaderState::kBad;
      continue;
    }
    encode_header(raw_records[j].meta, shape_, Key128{}, raw_images[j].span().first(kBlock));
    landing.push_back(i);
    land_records.push_back(raw_records[j]);
    land_images.emplace_back(raw_images[j].span());
  }
  if (landing.empty()) return {};
  const std::unique_ptr<Channel> memory =
      make_memory_channel(kit_.staging(), std::move(land_images));
  KVTIER_ASSIGN_OR_RETURN(ReadOutcome landed, read_stored(*memory, land_records, destination,
                                                          pick(firsts, landing), {}, {}));
  for (size_t k = 0; k < landing.size(); ++k) take(out, landing[k], landed, k);
  // The bytes moved were counted as stored; the host traffic of landing them is this read's.
  out.host_bytes += landed.host_bytes;
  if (out.status.ok()) out.status = landed.status;
  return {};
}

Result<ReadOutcome> ReadRoute::read_images(std::span<const LocatedRecord> records,
                                           std::vector<std::span<const std::byte>> images,
                                           std::span<const uint64_t> first_tokens,
                                           const KvMemory& destination) {
  const std::unique_ptr<Channel> channel = make_memory_channel(kit_.staging(), std::move(images));
  return read(*channel, records, &destination, first_tokens);
}

}  // namespace kvtier
