// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The memory channel: record images a tier already holds in host memory (the DRAM tier's slabs,
// values fetched from the cluster, a record re-read and verified on the host) go through the same
// read route as pieces read from a drive: headers checked in place, one copy each payload to the
// device, verified where it lands.
#include "api/try.hpp"
#include "datapath/channel.hpp"

namespace kvtier {
namespace {

class MemoryChannel final : public Channel {
 public:
  MemoryChannel(StagingPool& staging, std::vector<std::span<const std::byte>> images)
      : staging_(staging), images_(std::move(images)) {}

  std::string_view name() const override { return "host memory"; }
  StagingPool& staging() override { return staging_; }
  Residency residency() const override { return Residency::kHost; }

  Status read(std::span<const ChannelFile> /*files*/, std::span<const Piece> pieces,
              StagingPool::Lease& lease, PieceSink& sink, unsigned /*workers*/) override {
    const size_t slots = lease.slots().size();
    for (size_t p = 0; p < pieces.size(); ++p) {
      const Piece& piece = pieces[p];
      KVTIER_EXPECTS(piece.fd >= 0 && static_cast<size_t>(piece.fd) < images_.size() &&
                         piece.offset + piece.length <= images_[piece.fd].size(),
                     "a memory channel reads pieces of the images it holds");
      const size_t slot = p % slots;
      KVTIER_TRY(sink.release(slot));
      KVTIER_TRY(sink.consume(p, slot, images_[piece.fd].subspan(piece.offset, piece.length)));
    }
    return {};
  }

  Status write(std::span<const ChannelFile> /*files*/, std::span<const Piece> /*pieces*/,
               StagingPool::Lease& /*lease*/, PieceSink& /*sink*/) override {
    return {ErrorCode::kNotSupported, "record images in host memory are read, not written, here"};
  }

  // The copy to the device is the only traffic, and the device transfer accounts for it.
  uint64_t host_bytes(uint64_t /*bytes*/) const override { return 0; }

 private:
  StagingPool& staging_;
  std::vector<std::span<const std::byte>> images_;
};

}  // namespace

std::unique_ptr<Channel> make_memory_channel(StagingPool& staging,
                                             std::vector<std::span<const std::byte>> images) {
  return std::make_unique<MemoryChannel>(staging, std::move(images));
}

}  // namespace kvtier
