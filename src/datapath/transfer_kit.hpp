// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The transfer kit of one engine: the channels bytes travel through, the devices that move them
// into and out of the caller's KV memory, and the staging between. It holds no route: the read and
// write routes above (engine/read_route.cpp, engine/write_route.cpp) take a channel and a device
// from it and run every transfer the same way.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "datapath/channel.hpp"
#include "device/device.hpp"
#include "io/gds/gds.hpp"
#include "io/io_engine.hpp"
#include "io/pipeline.hpp"

namespace kvtier {

/// @brief Devices, channels and staging of one engine. Thread-safe: CUDA and cuFile start once,
/// on first use; fallback notes are guarded.
class TransferKit {
 public:
  /// `staging`: the engine's staging pool, made by the caller, which can say why it cannot be had.
  /// `pinned_extra`: host memory besides staging that copies to a GPU start from (the DRAM tier's
  /// arena, the remote tier's value buffers), pinned with the staging when the CUDA device starts;
  /// it must outlive the kit. `direct`: the store's files are
  /// open with O_DIRECT; `open_fallback`: why the store or I/O engine did not get what was asked.
  TransferKit(IoPath path, std::unique_ptr<StagingPool> staging,
              std::vector<std::span<std::byte>> pinned_extra, bool direct,
              std::string open_fallback, const Logger& log);
  ~TransferKit();
  TransferKit(const TransferKit&) = delete;
  TransferKit& operator=(const TransferKit&) = delete;

  /// The device that can address `kind` memory (CUDA started on first use).
  [[nodiscard]] Result<Device*> device_for(MemoryKind kind) const;
  /// The channel between the store's files and `kv`, in either direction: cuFile where it is in
  /// use for that device, else the POSIX channel (O_DIRECT or buffered, as the store's files were
  /// opened). `through_host`: the bytes must pass through host memory anyway (a save's
  /// write-through into the DRAM tier), so POSIX.
  [[nodiscard]] Channel& file_channel_for(const KvMemory* kv, bool through_host = false);
  /// The POSIX channel: verify, the read ceiling, moves between tiers, and every fallback.
  [[nodiscard]] Channel& posix_channel() { return *posix_; }
  /// Records that cuFile refused the store's files (`why`); later operations use POSIX.
  void refuse_gds(const Status& why);
  /// Counts a transfer of host-memory KV under IoPath::kGds as a fallback, and says why once:
  /// GPUDirect Storage moves GPU memory only.
  void note_host_memory();
  [[nodiscard]] StagingPool& staging() { return *staging_; }
  [[nodiscard]] bool direct() const { return direct_; }

  /// For Stats: the I/O engine in use, why a requested path was not used, cuFile's mode and counts,
  /// and how many operations fell back.
  [[nodiscard]] const std::string& io_name() const { return io_name_; }
  [[nodiscard]] std::string fallback() const;
  [[nodiscard]] std::string gds_note() const;
  [[nodiscard]] std::string gds_io_counts() const;
  [[nodiscard]] uint64_t fallbacks() const;

 private:
  void start_cuda() const;
  /// Under IoPath::kGds: records at open that there is no GPU for cuFile to reach.
  void note_gds_without_gpu();
  std::string start_gds(int device) const;
  /// The cuFile context for `device` (started on first use), or null where cuFile is not in use.
  [[nodiscard]] GdsContext* gds_for(int device) const;
  std::vector<std::span<std::byte>> pinned_memory() const;

  IoPath path_;
  const Logger& log_;
  bool direct_;
  std::unique_ptr<StagingPool> staging_;
  std::vector<std::span<std::byte>> pinned_extra_;
  std::unique_ptr<Device> host_device_;
  std::unique_ptr<Channel> posix_;
  std::string io_name_;

  mutable std::once_flag cuda_once_;
  mutable std::unique_ptr<Device> cuda_device_;  // null when this build or machine has no CUDA GPU
  mutable std::string cuda_unavailable_;         // why cuda_device_ is null
  mutable std::once_flag gds_once_;
  mutable std::unique_ptr<GdsContext> gds_;  // null unless restores go through cuFile
  mutable std::unique_ptr<Channel> gds_channel_;
  mutable std::mutex mu_;         // guards the notes below
  mutable std::string gds_note_;  // cuFile's mode, or why it is not used
  std::string fallback_;
  uint64_t fallbacks_ = 0;
  bool gds_refused_ = false;
  bool host_memory_noted_ = false;
};

}  // namespace kvtier
