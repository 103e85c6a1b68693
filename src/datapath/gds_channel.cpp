// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cuFile channel: synchronous cuFile reads and writes, one thread per leased device buffer.
#include <map>
#include <unordered_map>
#include <vector>

#include "api/try.hpp"
#include "datapath/channel.hpp"

namespace kvtier {
namespace {

/// The pieces' order with consecutive ones on different drives, each drive's own in file order: a
/// store over several drives places whole segments on one drive, so reading in record order would
/// keep every thread on one drive at a time.
std::vector<size_t> interleaved_by_drive(std::span<const Piece> pieces,
                                         const std::unordered_map<int, uint32_t>& drive_of) {
  std::map<uint32_t, std::vector<size_t>> by_drive;
  for (size_t p = 0; p < pieces.size(); ++p) by_drive[drive_of.at(pieces[p].fd)].push_back(p);
  std::vector<size_t> order;
  order.reserve(pieces.size());
  for (size_t k = 0; order.size() < pieces.size(); ++k) {
    for (const auto& [drive, list] : by_drive) {
      if (k < list.size()) order.push_back(list[k]);
    }
  }
  return order;
}

class GdsChannel final : public Channel {
 public:
  explicit GdsChannel(GdsContext& gds) : gds_(gds) {}

  std::string_view name() const override { return "cuFile"; }
  StagingPool& staging() override { return gds_.buffers(); }
  Residency residency() const override { return Residency::kDevice; }

  Status prepare(std::span<const ChannelFile> files) override {
    for (const ChannelFile& f : files) KVTIER_TRY(gds_.attach(f.fd, f.path, f.owner));
    return {};
  }

  Status read(std::span<const ChannelFile> files, std::span<const Piece> pieces,
              StagingPool::Lease& lease, PieceSink& sink, unsigned /*workers*/) override {
    std::unordered_map<int, uint32_t> drive_of;
    for (const ChannelFile& f : files) drive_of[f.fd] = f.drive;
    const std::vector<size_t> order = interleaved_by_drive(pieces, drive_of);
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

  Status write(std::span<const ChannelFile> /*files*/, std::span<const Piece> pieces,
               StagingPool::Lease& lease, PieceSink& sink) override {
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
  GdsContext& gds_;
};

}  // namespace

std::unique_ptr<Channel> make_gds_channel(GdsContext& gds) {
  return std::make_unique<GdsChannel>(gds);
}

}  // namespace kvtier
