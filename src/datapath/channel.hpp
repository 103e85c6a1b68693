// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Channels: the ways record bytes travel between where a tier keeps them (store files on the
// drives, host memory) and the staging the device copies from or fills, in either direction. A
// channel reads pieces into its staging, or hands over pieces of record images it already holds,
// giving each to a sink as it lands; it writes pieces a sink built in its staging. The read and
// write routes above (engine/read_route.cpp, engine/write_route.cpp) are the same for all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gds/gds.hpp"
#include "io/io_engine.hpp"
#include "io/pipeline.hpp"

namespace kvtier {

/// Where the pieces a channel hands over sit: what a sink reads headers from and what the device
/// copies payloads from. A property of the channel's staging, the same whichever tier the bytes
/// belong to.
enum class Residency : uint8_t {
  kHost,    ///< host memory (staging slots, or images held in memory): readable in place
  kDevice,  ///< device buffers (cuFile): headers are copied back to be read
};

/// A file a channel reads or writes pieces of, as the store that owns it describes it.
struct ChannelFile {
  int fd = -1;
  std::string path;  ///< for messages and cuFile's registration
  uint32_t drive = 0;
  std::shared_ptr<const void> owner;  ///< holds the file open while a channel keeps it (cuFile)
};

/// @brief One way of moving pieces of records between where they are kept and staging.
/// Thread-safe: concurrent operations each lease their share of the channel's staging. A piece's
/// `fd` names a file of the operation's `files` (or, for a memory channel, one of its images).
class Channel {
 public:
  virtual ~Channel() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The staging this channel reads into or writes from; its slots bound the pieces in flight.
  [[nodiscard]] virtual StagingPool& staging() = 0;
  [[nodiscard]] virtual Residency residency() const = 0;
  /// Readies `files` (cuFile registers each once, for the engine's life). kNotSupported: this
  /// channel cannot move them, and nothing was moved (the caller takes another).
  [[nodiscard]] virtual Status prepare(std::span<const ChannelFile> /*files*/) { return {}; }
  /// Reads every piece (of prepared `files`) into the slots of `lease`, calling sink.consume() as
  /// each lands (in any order; on up to `workers` threads where the channel has a choice) and
  /// sink.release(slot) before a slot is reused or handed back.
  [[nodiscard]] virtual Status read(std::span<const ChannelFile> files,
                                    std::span<const Piece> pieces, StagingPool::Lease& lease,
                                    PieceSink& sink, unsigned workers) = 0;
  /// Writes every piece (of prepared `files`), each built in a slot of `lease` by sink.fill()
  /// first, calling sink.release(slot) before a slot is reused or handed back. kNotSupported from a
  /// channel that cannot write.
  [[nodiscard]] virtual Status write(std::span<const ChannelFile> files,
                                     std::span<const Piece> pieces, StagingPool::Lease& lease,
                                     PieceSink& sink) = 0;
  /// Host memory traffic of reading `bytes` through this channel, accounted from what it moves.
  [[nodiscard]] virtual uint64_t host_bytes(uint64_t bytes) const = 0;
};

/// Makes the I/O engine of one read or write that goes through `slots` (the staging slots it reads
/// into or writes from) in `pieces` requests.
using EngineMaker = std::function<std::unique_ptr<IoEngine>(FixedBuffers slots, size_t pieces)>;

/// Files through `make_engine`'s I/O engine (O_DIRECT, or buffered: as the files were opened),
/// through host staging.
std::unique_ptr<Channel> make_posix_channel(StagingPool& staging, bool direct,
                                            EngineMaker make_engine);

/// Files through cuFile, into and out of `gds`'s registered device buffers.
std::unique_ptr<Channel> make_gds_channel(GdsContext& gds);

/// Record images already in host memory (header block then payload: a DRAM tier slab, a value
/// fetched from the cluster), `images[i]` read as the pieces whose fd is i. The caller keeps them
/// alive (and, for a GPU, pinned where it can) until the read returns. Each piece is handed to the
/// sink from where it is, in turn on the calling thread; `staging`'s slots bound the copies in
/// flight, their memory unused.
std::unique_ptr<Channel> make_memory_channel(StagingPool& staging,
                                             std::vector<std::span<const std::byte>> images);

}  // namespace kvtier
