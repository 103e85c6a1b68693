// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cuFile byte source: synchronous cuFile reads and writes, one thread per leased device buffer.
#include <map>
#include <unordered_map>
#include <vector>

#include "api/try.hpp"
#include "datapath/byte_source.hpp"

namespace kvtier {
namespace {

/// The pieces' order with consecutive ones on different drives, each drive's own in file order: a
/// store over several drives places whole segments on one drive, so reading in record order would
/// keep every thread on one drive at a time.
std::vector<size_t> interleaved_by_drive(std::span<const Piece> pieces,
                                         const std::unordered_map<int, const SegmentFile*>& files) {
  std::map<uint32_t, std::vector<size_t>> by_drive;
  for (size_t p = 0; p < pieces.size(); ++p) by_drive[files.at(pieces[p].fd)->drive].push_back(p);
  std::vector<size_t> order;
  order.reserve(pieces.size());
  for (size_t k = 0; order.size() < pieces.size(); ++k) {
    for (const auto& [drive, list] : by_drive) {
      if (k < list.size()) order.push_back(list[k]);
    }
  }
  return order;
}

class GdsSource final : public ByteSource {
 public:
  explicit GdsSource(GdsContext& gds) : gds_(gds) {}

  std::string_view name() const override { return "cuFile"; }
  StagingPool& staging() override { return gds_.buffers(); }
  Landing landing() const override { return Landing::kDevice; }

  Status prepare(std::span<const LocatedRecord> records) override {
    for (const LocatedRecord& r : records)
      KVTIER_TRY(gds_.attach(r.file->fd.get(), r.file->path, r.file));
    return {};
  }

  Status read(std::span<const LocatedRecord> records, std::span<const Piece> pieces,
              StagingPool::Lease& lease, RecordSink& sink, unsigned /*workers*/) override {
    const auto files = files_of(records);
    const std::vector<size_t> order = interleaved_by_drive(pieces, files);
    auto body = [&](size_t i, size_t slot) -> Status {
      const size_t p = order[i];
      const Piece& piece = pieces[p];
      std::byte* buffer = lease.slots()[slot].data();
      KVTIER_TRY(gds_.read(piece.fd, buffer, piece.offset, piece.length));
      return sink.consume(p, slot, std::span<const std::byte>(buffer, piece.length));
    };
    return run_on_threads(
        pieces.size(), lease, [&](size_t slot) { return sink.release(slot); }, body);
  }

  Status write(std::span<const LocatedRecord> /*records*/, std::span<const Piece> pieces,
               StagingPool::Lease& lease, RecordSink& sink) override {
    auto body = [&](size_t p, size_t slot) -> Status {
      const Piece& piece = pieces[p];
      std::byte* buffer = lease.slots()[slot].data();
      KVTIER_TRY(sink.fill(p, slot, std::span<std::byte>(buffer, piece.length)));
      return gds_.write(piece.fd, buffer, piece.offset, piece.length);
    };
    return run_on_threads(
        pieces.size(), lease, [&](size_t slot) { return sink.release(slot); }, body);
  }

  // Peer-to-peer, payload never touches host memory; in compat mode cuFile reads into its own host
  // bounce buffers and copies those to the device.
  uint64_t host_bytes(uint64_t bytes) const override {
    return gds_.mode().peer_to_peer ? 0 : 2 * bytes;
  }

 private:
  static std::unordered_map<int, const SegmentFile*> files_of(
      std::span<const LocatedRecord> records) {
    std::unordered_map<int, const SegmentFile*> files;
    for (const LocatedRecord& r : records) files[r.file->fd.get()] = r.file.get();
    return files;
  }

  GdsContext& gds_;
};

}  // namespace

std::unique_ptr<ByteSource> make_gds_source(GdsContext& gds) {
  return std::make_unique<GdsSource>(gds);
}

}  // namespace kvtier
