// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Byte sources: where a restore's record bytes come from and a save's go to. Each reads pieces of
// store files into its staging (host slots, or registered device buffers), or hands over payloads
// it already holds in host memory, giving each to a sink as it lands, and writes pieces a sink
// built in its staging; the read and write routes above (engine/read_route.cpp, engine/save.cpp)
// are the same for all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "io/gds/gds.hpp"
#include "io/io_engine.hpp"
#include "io/pipeline.hpp"
#include "store/store.hpp"

namespace kvtier {

/// Where a source's bytes are when the sink gets them, which decides how they are checked and
/// accounted.
enum class Landing : uint8_t {
  kHostStaging,  ///< pieces of store files in host staging slots: headers checked in place
  kDevice,       ///< pieces of store files in device buffers: headers copied back to be checked
  kHostMemory,   ///< payloads the source already holds in host memory (the DRAM tier, records
                 ///< fetched from the remote tier): whole headers were checked before, by the
                 ///< source's owner; each payload is copied to the device from where it is
};

/// What a source hands its bytes to: pieces of store files (PieceSink::consume), or payloads held
/// in host memory.
class RecordSink : public PieceSink {
 public:
  /// Bytes [at, at + data.size()) of the payload of record `record`, standing in staging slot
  /// `slot`'s place (release(slot) is called before the slot is used again).
  [[nodiscard]] virtual Status consume_payload(size_t /*record*/, size_t /*slot*/, uint64_t /*at*/,
                                               std::span<const std::byte> /*data*/) {
    return {};
  }
};

/// @brief One way of reading and writing store files. Thread-safe: concurrent reads each lease
/// their share of the source's staging.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The staging this source reads into; its slots bound the pieces in flight.
  [[nodiscard]] virtual StagingPool& staging() = 0;
  [[nodiscard]] virtual Landing landing() const = 0;
  /// Readies the files of `records` (cuFile registers each once, for the engine's life).
  /// kNotSupported: this source cannot read them, and nothing was read (the caller takes another).
  [[nodiscard]] virtual Status prepare(std::span<const LocatedRecord> /*records*/) { return {}; }
  /// Reads every piece of `records`' files (prepared) into the slots of `lease`, calling
  /// sink.consume() as each lands (in any order; on up to `workers` threads where the source has a
  /// choice) and sink.release(slot) before a slot is reused or handed back. A kHostMemory source
  /// has no pieces to read: it calls sink.consume_payload() for each record's payload instead.
  [[nodiscard]] virtual Status read(std::span<const LocatedRecord> records,
                                    std::span<const Piece> pieces, StagingPool::Lease& lease,
                                    RecordSink& sink, unsigned workers) = 0;
  /// Writes every piece of `records`' files (prepared), each built in a slot of `lease` by
  /// sink.fill() first, calling sink.release(slot) before a slot is reused or handed back.
  /// kNotSupported from a source that cannot write store files.
  [[nodiscard]] virtual Status write(std::span<const LocatedRecord> records,
                                     std::span<const Piece> pieces, StagingPool::Lease& lease,
                                     RecordSink& sink) = 0;
  /// Host memory traffic of reading `bytes` through this source, accounted from what it moves.
  [[nodiscard]] virtual uint64_t host_bytes(uint64_t bytes) const = 0;
};

/// Makes the I/O engine of one read or write that goes through `slots` (the staging slots it reads
/// into or writes from) in `pieces` requests.
using EngineMaker = std::function<std::unique_ptr<IoEngine>(FixedBuffers slots, size_t pieces)>;

/// O_DIRECT (or buffered, as the store's files were opened) through `make_engine`'s I/O engine,
/// through host staging.
std::unique_ptr<ByteSource> make_posix_source(StagingPool& staging, bool direct,
                                              EngineMaker make_engine);

/// cuFile, through `gds`'s registered device buffers.
std::unique_ptr<ByteSource> make_gds_source(GdsContext& gds);

/// Payloads already in host memory, `payloads[i]` that of the read's record i, which the caller
/// keeps alive (and, for a GPU, pinned where it can) until the read returns. Each is handed to the
/// sink in pieces of at most a slot, in turn on the calling thread; `staging`'s slots bound the
/// copies in flight, their memory unused (a copy starts from where the payload is).
std::unique_ptr<ByteSource> make_memory_source(StagingPool& staging,
                                               std::vector<std::span<const std::byte>> payloads);

}  // namespace kvtier
