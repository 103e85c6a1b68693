// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Byte sources: where a restore's record bytes come from. Each reads pieces of store files into
// its staging (host slots, or registered device buffers) and hands each piece to a sink as it
// lands; the read route above (engine/restore.cpp) is the same for all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "io/gds/gds.hpp"
#include "io/io_engine.hpp"
#include "io/pipeline.hpp"
#include "store/store.hpp"

namespace kvtier {

/// @brief One way of reading store files. Thread-safe: concurrent reads each lease their share of
/// the source's staging.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The staging this source reads into.
  [[nodiscard]] virtual StagingPool& staging() = 0;
  /// Whether pieces land in device memory: the sink then copies headers back to check them and
  /// scatters from device memory.
  [[nodiscard]] virtual bool device_resident() const = 0;
  /// Readies the files of `records` (cuFile registers each once, for the engine's life).
  /// kNotSupported: this source cannot read them, and nothing was read (the caller takes another).
  [[nodiscard]] virtual Status prepare(std::span<const LocatedRecord> /*records*/) { return {}; }
  /// Reads every piece of `records`' files (prepared) into the slots of `lease`, calling
  /// sink.consume() as each lands (in any order; on up to `workers` threads where the source has a
  /// choice) and sink.release(slot) before a slot is reused or handed back.
  [[nodiscard]] virtual Status read(std::span<const LocatedRecord> records,
                                    std::span<const Piece> pieces, StagingPool::Lease& lease,
                                    PieceSink& sink, unsigned workers) = 0;
  /// Host memory traffic of reading `bytes` through this source, accounted from what it moves.
  [[nodiscard]] virtual uint64_t host_bytes(uint64_t bytes) const = 0;
};

/// Makes the I/O engine of one read that goes through `slots` (the staging slots it reads into)
/// in `pieces` requests.
using EngineMaker = std::function<std::unique_ptr<IoEngine>(FixedBuffers slots, size_t pieces)>;

/// O_DIRECT (or buffered, as the store's files were opened) through `make_engine`'s I/O engine into
/// host staging.
std::unique_ptr<ByteSource> make_posix_source(StagingPool& staging, bool direct,
                                              EngineMaker make_engine);

/// cuFile into `gds`'s registered device buffers.
std::unique_ptr<ByteSource> make_gds_source(GdsContext& gds);

}  // namespace kvtier
