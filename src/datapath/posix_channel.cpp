// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The POSIX channel: the staging pipeline over an I/O engine (io_uring, or pread threads).
#include "datapath/channel.hpp"
#include "datapath/drive_lanes.hpp"

namespace kvtier {
namespace {

class PosixChannel final : public Channel {
 public:
  PosixChannel(StagingPool& staging, bool direct, EngineMaker make_engine)
      : staging_(staging), direct_(direct), make_engine_(std::move(make_engine)) {}

  std::string_view name() const override { return direct_ ? "O_DIRECT" : "buffered"; }
  StagingPool& staging() override { return staging_; }
  Residency residency() const override { return Residency::kHost; }

  Status read(std::span<const ChannelFile> files, std::span<const Piece> pieces,
              StagingPool::Lease& lease, PieceSink& sink, unsigned workers) override {
    // A store over several drives reads them all at once, each within its share of the staging.
    if (drives_of(files) > 1 && lease.slots().size() > 1) {
      return read_across_drives(files, pieces, lease, sink, workers, make_engine_);
    }
    auto io = make_engine_(lease.slots(), pieces.size());
    return run_pipeline(*io, pieces, lease.slots(), /*write=*/false, sink, workers, &lease);
  }

  Status write(std::span<const ChannelFile> /*files*/, std::span<const Piece> pieces,
               StagingPool::Lease& lease, PieceSink& sink) override {
    auto io = make_engine_(lease.slots(), pieces.size());
    return run_pipeline(*io, pieces, lease.slots(), /*write=*/true, sink, 0, &lease);
  }

  // O_DIRECT: the drive's DMA writes staging once. Buffered: it writes the page cache, and the
  // kernel's copy into staging reads that and writes staging.
  uint64_t host_bytes(uint64_t bytes) const override { return direct_ ? bytes : 3 * bytes; }

 private:
  StagingPool& staging_;
  bool direct_;
  EngineMaker make_engine_;
};

}  // namespace

std::unique_ptr<Channel> make_posix_channel(StagingPool& staging, bool direct,
                                            EngineMaker make_engine) {
  return std::make_unique<PosixChannel>(staging, direct, std::move(make_engine));
}

}  // namespace kvtier
