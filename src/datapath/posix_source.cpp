// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The POSIX byte source: the staging pipeline over an I/O engine (io_uring, or pread threads).
#include "datapath/byte_source.hpp"
#include "datapath/drive_lanes.hpp"

namespace kvtier {
namespace {

class PosixSource final : public ByteSource {
 public:
  PosixSource(StagingPool& staging, bool direct, EngineMaker make_engine)
      : staging_(staging), direct_(direct), make_engine_(std::move(make_engine)) {}

  std::string_view name() const override { return direct_ ? "O_DIRECT" : "buffered"; }
  StagingPool& staging() override { return staging_; }
  Landing landing() const override { return Landing::kHostStaging; }

  Status read(std::span<const LocatedRecord> records, std::span<const Piece> pieces,
              StagingPool::Lease& lease, RecordSink& sink, unsigned workers) override {
    // A store over several drives reads them all at once, each within its share of the staging.
    if (drives_of(records) > 1 && lease.slots().size() > 1) {
      return read_across_drives(records, pieces, lease, sink, workers, make_engine_);
    }
    auto io = make_engine_(lease.slots(), pieces.size());
    return run_pipeline(*io, pieces, lease.slots(), /*write=*/false, sink, workers, &lease);
  }

  Status write(std::span<const LocatedRecord> /*records*/, std::span<const Piece> pieces,
               StagingPool::Lease& lease, RecordSink& sink) override {
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

std::unique_ptr<ByteSource> make_posix_source(StagingPool& staging, bool direct,
                                              EngineMaker make_engine) {
  return std::make_unique<PosixSource>(staging, direct, std::move(make_engine));
}

}  // namespace kvtier
