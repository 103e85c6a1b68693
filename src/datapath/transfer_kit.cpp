// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "datapath/transfer_kit.hpp"

#include <utility>

#include <fmt/format.h>

namespace kvtier {

TransferKit::TransferKit(IoPath path, std::unique_ptr<StagingPool> staging,
                         std::vector<std::span<std::byte>> pinned_extra, bool direct,
                         std::string open_fallback, const Logger& log)
    : path_(path),
      log_(log),
      direct_(direct),
      staging_(std::move(staging)),
      pinned_extra_(std::move(pinned_extra)),
      host_device_(make_host_device()),
      fallback_(std::move(open_fallback)) {
  std::string engine_fallback;
  auto probe = make_io_engine(path_, 1, engine_fallback);
  io_name_ = fmt::format("{}{}", probe->name(), direct_ ? "+O_DIRECT" : " (buffered)");
  if (!engine_fallback.empty()) {
    KVTIER_LOG(log_, kWarn, "{}", engine_fallback);
    fallback_ += (fallback_.empty() ? "" : "; ") + engine_fallback;
  }
  if (path_ == IoPath::kGds) note_gds_without_gpu();
  if (!fallback_.empty()) fallbacks_ = 1;
  posix_ = make_posix_channel(*staging_, direct_, [this](FixedBuffers slots, size_t pieces) {
    // Registering pins the slots once for the read; worth it only where slots are reused.
    std::string ignored;  // the reason was logged and recorded when the kit was made
    return make_io_engine(path_, static_cast<uint32_t>(slots.size()), ignored,
                          pieces > slots.size() ? slots : FixedBuffers{});
  });
}

void TransferKit::note_gds_without_gpu() {
  // Said at open, so that an engine (or `kvtier stat --io gds`) shows it before any transfer.
  std::call_once(cuda_once_, [this] { start_cuda(); });
  if (cuda_device_) return;
  const std::string why = fmt::format(
      "I/O path gds: no CUDA device ({}), so no GPU memory for GPUDirect Storage to read into: "
      "KV in host memory moves through {}",
      cuda_unavailable_, io_name_);
  KVTIER_LOG(log_, kWarn, "{}", why);
  fallback_ += (fallback_.empty() ? "" : "; ") + why;
  host_memory_noted_ = true;  // the same fact as the note below, said once
}

void TransferKit::note_host_memory() {
  if (path_ != IoPath::kGds) return;
  std::lock_guard lock(mu_);
  ++fallbacks_;
  if (std::exchange(host_memory_noted_, true)) return;
  const std::string why = fmt::format(
      "I/O path gds: KV in host memory, which GPUDirect Storage cannot read into or write from, "
      "moves through {}",
      io_name_);
  KVTIER_LOG(log_, kWarn, "{}", why);
  fallback_ += (fallback_.empty() ? "" : "; ") + why;
}

TransferKit::~TransferKit() {
  gds_channel_.reset();
  gds_.reset();  // cuFile lets go of its handles and buffers while CUDA is still up
  if (cuda_device_) {
    for (std::span<std::byte> m : pinned_memory()) cuda_device_->unregister_staging(m);
  }
}

std::vector<std::span<std::byte>> TransferKit::pinned_memory() const {
  std::vector<std::span<std::byte>> out = staging_->all_slots();
  for (std::span<std::byte> m : pinned_extra_) {
    if (!m.empty()) out.push_back(m);
  }
  return out;
}

Result<Device*> TransferKit::device_for(MemoryKind kind) const {
  if (host_device_->accepts(kind)) return host_device_.get();
  std::call_once(cuda_once_, [this] { start_cuda(); });
  if (cuda_device_ && cuda_device_->accepts(kind)) return cuda_device_.get();
  return fail(ErrorCode::kNotSupported,
              fmt::format("KV memory on a CUDA device, but this engine has no CUDA device: {}",
                          cuda_unavailable_));
}

namespace {

/// A CUDA status without Status::to_string's "(errno N: ...)": its native error is a cudaError_t,
/// which the message already names, and read as an errno it said e.g. "Resource deadlock avoided".
std::string cuda_reason(const Status& st) {
  return fmt::format("{}: {}", error_code_name(st.code()), st.message());
}

}  // namespace

void TransferKit::start_cuda() const {
  auto cuda = make_cuda_device();
  if (!cuda) {
    cuda_unavailable_ = cuda_reason(cuda.error());
    KVTIER_LOG(log_, kInfo, "no CUDA device: {}", cuda_unavailable_);
    return;
  }
  // Staging and the DRAM tier are pinned once for the engine's life: copies to the GPU then run
  // asynchronously.
  std::vector<std::span<std::byte>> done;
  for (std::span<std::byte> m : pinned_memory()) {
    Status st = (*cuda)->register_staging(m);
    if (!st.ok()) {
      for (auto d : done) (*cuda)->unregister_staging(d);
      cuda_unavailable_ = cuda_reason(st);
      KVTIER_LOG(log_, kWarn, "CUDA device unusable: {}", cuda_unavailable_);
      return;
    }
    done.push_back(m);
  }
  cuda_device_ = std::move(*cuda);
}

GdsContext* TransferKit::gds_for(int device) const {
  std::call_once(gds_once_, [&] {
    std::string note = start_gds(device);
    std::lock_guard lock(mu_);
    gds_note_ = std::move(note);
  });
  std::lock_guard lock(mu_);
  return gds_refused_ ? nullptr : gds_.get();
}

Channel& TransferKit::file_channel_for(const KvMemory* kv, bool through_host) {
  if (kv != nullptr && kv->kind != MemoryKind::kCuda) note_host_memory();
  if (kv != nullptr && kv->kind == MemoryKind::kCuda && !through_host &&
      gds_for(kv->device) != nullptr) {
    return *gds_channel_;
  }
  return *posix_;
}

std::string TransferKit::start_gds(int device) const {
  if (path_ != IoPath::kGds && path_ != IoPath::kAuto)
    return fmt::format("not used (I/O path {})", io_path_name(path_));
  // cuFile's buffers live on the GPU, allocated by the CUDA device (only src/cuda calls CUDA).
  GdsContext::Gpu gpu{[this, device]() -> Status {
                        std::call_once(cuda_once_, [this] { start_cuda(); });
                        if (!cuda_device_)
                          return {ErrorCode::kNotSupported, "no CUDA device: " + cuda_unavailable_};
                        return cuda_device_->make_current(device);
                      },
                      [this, device](size_t bytes) -> Result<std::shared_ptr<std::byte>> {
                        if (!cuda_device_) return fail(ErrorCode::kNotSupported, "no CUDA device");
                        return cuda_device_->allocate(device, bytes);
                      }};
  auto gds = GdsContext::create(std::move(gpu), staging_->slot_count(), staging_->slot_bytes());
  if (!gds) {
    std::string note = fmt::format("unavailable, restores use O_DIRECT + host bounce: {}",
                                   gds.error().to_string());
    const LogLevel level = path_ == IoPath::kGds ? LogLevel::kWarn : LogLevel::kInfo;
    if (log_.enabled(level)) log_.write(level, "GDS " + note);
    return note;
  }
  std::string note = (*gds)->mode().description;
  if (path_ == IoPath::kAuto && !(*gds)->mode().peer_to_peer) {
    note += "; auto uses O_DIRECT + host bounce instead";
    KVTIER_LOG(log_, kInfo, "GDS: {}", note);
    return note;
  }
  KVTIER_LOG(log_, kInfo, "GDS: {}", note);
  gds_ = std::move(*gds);
  gds_channel_ = make_gds_channel(*gds_);
  return note;
}

void TransferKit::refuse_gds(const Status& why) {
  std::lock_guard lock(mu_);
  if (!gds_refused_)
    KVTIER_LOG(log_, kWarn, "GDS refused the store's files; using O_DIRECT + host bounce: {}",
               why.to_string());
  fallback_ = "GDS: " + why.to_string();
  gds_refused_ = true;
  ++fallbacks_;
}

std::string TransferKit::fallback() const {
  std::lock_guard lock(mu_);
  return fallback_;
}

std::string TransferKit::gds_note() const {
  std::lock_guard lock(mu_);
  return gds_note_;
}

std::string TransferKit::gds_io_counts() const {
  std::lock_guard lock(mu_);
  // gds_ is settled once its note is (start_gds assigns it before the note is published).
  return !gds_note_.empty() && gds_ ? gds_->io_counts() : std::string();
}

uint64_t TransferKit::fallbacks() const {
  std::lock_guard lock(mu_);
  return fallbacks_;
}

}  // namespace kvtier
