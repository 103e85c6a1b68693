// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cuFile shim: dlopen of libcufile.so.0 so one binary starts on machines without it, typed
// against the real cufile.h.
#include <cuda_runtime.h>
#include <cufile.h>
#include <dlfcn.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/try.hpp"
#include "io/gds/gds.hpp"

namespace kvtier {
namespace {

/// The cuFile entry points kvtier uses. Loaded once, kept for the process (never unloaded: cuFile
/// keeps threads and CUDA state of its own).
struct CuFileApi {
  CUfileError_t (*driver_open)();
  CUfileError_t (*driver_close)();
  CUfileError_t (*driver_get_properties)(CUfileDrvProps_t*);
  CUfileError_t (*handle_register)(CUfileHandle_t*, CUfileDescr_t*);
  void (*handle_deregister)(CUfileHandle_t);
  CUfileError_t (*buf_register)(const void*, size_t, int);
  CUfileError_t (*buf_deregister)(const void*);
  ssize_t (*read)(CUfileHandle_t, void*, size_t, off_t, off_t);
  ssize_t (*write)(CUfileHandle_t, const void*, size_t, off_t, off_t);
  // The statistics API (libcufile 1.15+ headers); null where the library lacks it.
  CUfileError_t (*set_stats_level)(int) = nullptr;
  CUfileError_t (*stats_start)() = nullptr;
#ifdef CUFILE_GPU_UUID_LEN
  CUfileError_t (*stats_l3)(CUfileStatsLevel3_t*) = nullptr;
#endif
};

template <typename Fn>
bool bind(void* lib, Fn& fn, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* sym = dlsym(lib, name)) {
      fn = reinterpret_cast<Fn>(sym);
      return true;
    }
  }
  return false;
}

Result<const CuFileApi*> cufile_api() {
  static const Result<const CuFileApi*> api = []() -> Result<const CuFileApi*> {
    void* lib = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      return fail(ErrorCode::kNotSupported,
                  fmt::format("cannot load libcufile.so.0: {}", dlerror()));
    }
    static CuFileApi a{};
    const bool ok = bind(lib, a.driver_open, {"cuFileDriverOpen"}) &&
                    bind(lib, a.driver_close, {"cuFileDriverClose_v2", "cuFileDriverClose"}) &&
                    bind(lib, a.driver_get_properties, {"cuFileDriverGetProperties"}) &&
                    bind(lib, a.handle_register, {"cuFileHandleRegister"}) &&
                    bind(lib, a.handle_deregister, {"cuFileHandleDeregister"}) &&
                    bind(lib, a.buf_register, {"cuFileBufRegister"}) &&
                    bind(lib, a.buf_deregister, {"cuFileBufDeregister"}) &&
                    bind(lib, a.read, {"cuFileRead"}) && bind(lib, a.write, {"cuFileWrite"});
    bind(lib, a.set_stats_level, {"cuFileSetStatsLevel"});
    bind(lib, a.stats_start, {"cuFileStatsStart"});
#ifdef CUFILE_GPU_UUID_LEN
    bind(lib, a.stats_l3, {"cuFileGetStatsL3"});
#endif
    if (!ok)
      return fail(ErrorCode::kNotSupported, "libcufile.so.0 lacks a required cuFile entry point");
    return &a;
  }();
  return api;
}

/// The cuFile error domain.
Status cufile_status(CUfileError_t e, std::string_view context) {
  if (e.err == CU_FILE_SUCCESS) return {};
  std::string what = cufileop_status_error(e.err);
  if (e.err == CU_FILE_CUDA_DRIVER_ERROR)
    what += fmt::format(" (CUresult {})", static_cast<int>(e.cu_err));
  return Status(ErrorCode::kNotSupported,
                fmt::format("{}: cuFile error {}: {}", context, static_cast<int>(e.err), what),
                static_cast<int>(e.err));
}

// cuFile's driver is process-wide. It is opened once and stays open for the process: reopening
// it after a close is not something cuFile promises to support. It is closed by an atexit handler,
// which runs before the CUDA runtime's own teardown (registered earlier, so run later), as cuFile
// needs CUDA alive to free its bounce buffers.
std::mutex driver_mu;
bool driver_open = false;

void close_driver_at_exit() {
  if (auto api = cufile_api(); api && driver_open) (*api)->driver_close();
}

Status driver_acquire(const CuFileApi& api) {
  std::lock_guard lock(driver_mu);
  if (driver_open) return {};
  KVTIER_TRY(cufile_status(api.driver_open(), "cuFileDriverOpen"));
  driver_open = true;
  // Per-GPU counts of peer-to-peer and POSIX operations: cuFile's own word on how it served us.
  if (api.set_stats_level != nullptr && api.stats_start != nullptr &&
      api.set_stats_level(3).err == CU_FILE_SUCCESS) {
    (void)api.stats_start();
  }
  std::atexit(close_driver_at_exit);
  return {};
}

GdsMode mode_of(const CUfileDrvProps_t& props) {
  // nvidia-fs (or PCI P2PDMA) reports the storage targets it can serve peer-to-peer; with none,
  // cuFile serves every read through its own host bounce buffers (compatibility mode).
  const bool nvfs = std::filesystem::exists("/proc/driver/nvidia-fs");
  const unsigned targets = props.nvfs.dstatusflags;
  GdsMode m;
  m.peer_to_peer = targets != 0;
  m.description =
      m.peer_to_peer
          ? fmt::format("GPUDirect Storage peer-to-peer (driver status flags {:#x}{})", targets,
                        nvfs ? ", nvidia-fs loaded" : "")
          : fmt::format(
                "cuFile compat mode: no peer-to-peer storage target (status flags {:#x}, "
                "nvidia-fs {}); reads bounce through cuFile's host buffers",
                targets, nvfs ? "loaded" : "not loaded");
  return m;
}

}  // namespace

bool gds_compiled_in() { return true; }

class GdsContext::Impl {
 public:
  const CuFileApi* api = nullptr;
  int device = 0;
  GdsMode mode;
  std::vector<void*> buffers;
  std::vector<bool> registered;
  std::unique_ptr<StagingPool> pool;  // over `buffers`, once all are registered
  std::mutex mu;
  std::unordered_map<const SegmentFile*, std::pair<CUfileHandle_t, std::shared_ptr<SegmentFile>>>
      handles;

  ~Impl() {
    cudaSetDevice(device);
    for (auto& [file, entry] : handles) api->handle_deregister(entry.first);
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (registered[i]) api->buf_deregister(buffers[i]);
      cudaFree(buffers[i]);
    }
  }
};

GdsContext::GdsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GdsContext::~GdsContext() = default;

Result<std::unique_ptr<GdsContext>> GdsContext::create(int device, size_t buffers,
                                                       size_t buffer_bytes) {
  KVTIER_ASSIGN_OR_RETURN(const CuFileApi* api, cufile_api());
  auto impl = std::make_unique<Impl>();
  impl->api = api;
  impl->device = device;
  if (cudaSetDevice(device) != cudaSuccess) return fail(ErrorCode::kDevice, "cudaSetDevice failed");
  KVTIER_TRY(driver_acquire(*api));
  CUfileDrvProps_t props{};
  KVTIER_TRY(cufile_status(api->driver_get_properties(&props), "cuFileDriverGetProperties"));
  impl->mode = mode_of(props);
  for (size_t i = 0; i < buffers; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, buffer_bytes) != cudaSuccess)
      return fail(ErrorCode::kDevice, "cudaMalloc of GDS staging");
    impl->buffers.push_back(p);
    impl->registered.push_back(false);
    KVTIER_TRY(cufile_status(api->buf_register(p, buffer_bytes, 0), "cuFileBufRegister"));
    impl->registered.back() = true;
  }
  std::vector<std::span<std::byte>> slots;
  for (void* p : impl->buffers) slots.emplace_back(static_cast<std::byte*>(p), buffer_bytes);
  impl->pool = std::make_unique<StagingPool>(std::move(slots), buffer_bytes);
  return std::unique_ptr<GdsContext>(new GdsContext(std::move(impl)));
}

const GdsMode& GdsContext::mode() const { return impl_->mode; }
StagingPool& GdsContext::buffers() { return *impl_->pool; }

Status GdsContext::attach(const std::shared_ptr<SegmentFile>& file) {
  std::lock_guard lock(impl_->mu);
  if (impl_->handles.contains(file.get())) return {};
  // Segments the store has since evicted are held open only by this map: deregister and let them
  // go, so their disk space comes back (the caller holds a reference to every file it is using).
  for (auto it = impl_->handles.begin(); it != impl_->handles.end();) {
    if (it->second.second.use_count() == 1) {
      impl_->api->handle_deregister(it->second.first);
      it = impl_->handles.erase(it);
    } else {
      ++it;
    }
  }
  CUfileDescr_t descr{};
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  descr.handle.fd = file->fd.get();
  CUfileHandle_t handle{};
  Status st = cufile_status(impl_->api->handle_register(&handle, &descr),
                            fmt::format("cuFileHandleRegister({})", file->path));
  if (!st.ok() && st.native_error() == CU_FILE_HANDLE_NOT_REGISTERED) {
    // Seen where the machine has no udev database: cuFile looks up the block device's
    // ID_FS_USAGE through libudev and gives up. Say what is missing.
    return st.with_context(
        "cuFile could not identify the filesystem's block device (is udev's database, "
        "/run/udev/data, populated for it?)");
  }
  if (!st.ok()) return st;
  impl_->handles.emplace(file.get(), std::pair{handle, file});
  return {};
}

// cuFileRead or cuFileWrite of [offset, offset + bytes) against `buffer`, looping over short
// transfers.
Status GdsContext::transfer(const SegmentFile& file, std::byte* buffer, uint64_t offset,
                            size_t bytes, bool write) {
  CUfileHandle_t handle;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->handles.find(&file);
    if (it == impl_->handles.end())
      return {ErrorCode::kInternal, "GDS I/O on a file that was not attached"};
    handle = it->second.first;
  }
  const char* what = write ? "cuFileWrite" : "cuFileRead";
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n =
        write ? impl_->api->write(handle, buffer, bytes - done, static_cast<off_t>(offset + done),
                                  static_cast<off_t>(done))
              : impl_->api->read(handle, buffer, bytes - done, static_cast<off_t>(offset + done),
                                 static_cast<off_t>(done));
    if (n < 0 && (n == -EINTR || n == -EAGAIN)) continue;
    if (n == -1) return posix_error(errno, fmt::format("{} of {}", what, file.path));
    if (n < 0) {
      return Status(ErrorCode::kIo, fmt::format("{} of {}: cuFile error {}", what, file.path, -n),
                    static_cast<int>(-n));
    }
    if (n == 0) {
      return write
                 ? Status(ErrorCode::kIo, fmt::format("cuFileWrite of {} wrote nothing", file.path))
                 : Status(ErrorCode::kCorrupt,
                          "segment file ends before a record does (short GDS read)");
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Status GdsContext::read(const SegmentFile& file, std::byte* buffer, uint64_t offset, size_t bytes) {
  return transfer(file, buffer, offset, bytes, /*write=*/false);
}

Status GdsContext::write(const SegmentFile& file, std::byte* buffer, uint64_t offset,
                         size_t bytes) {
  return transfer(file, buffer, offset, bytes, /*write=*/true);
}

std::string GdsContext::io_counts() const {
#ifdef CUFILE_GPU_UUID_LEN
  if (impl_->api->stats_l3 == nullptr) return "cuFile statistics API not in this libcufile";
  auto stats = std::make_unique<CUfileStatsLevel3_t>();
  if (impl_->api->stats_l3(stats.get()).err != CU_FILE_SUCCESS)
    return "cuFile statistics unavailable";
  uint64_t reads = 0, p2p = 0, nvfs = 0, posix = 0, writes = 0, wp2p = 0, wnvfs = 0, wposix = 0;
  for (uint32_t g = 0; g < std::min<uint32_t>(stats->num_gpus, 16); ++g) {
    const CUfilePerGpuStats_t& s = stats->per_gpu_stats[g];
    reads += s.n_total_reads;
    p2p += s.n_p2p_reads;
    nvfs += s.n_nvfs_reads;
    posix += s.n_posix_reads;
    writes += s.n_total_writes;
    wp2p += s.n_p2p_writes;
    wnvfs += s.n_nvfs_writes;
    wposix += s.n_posix_writes;
  }
  return fmt::format(
      "cuFile stats: {} reads ({} P2PDMA, {} nvidia-fs, {} POSIX), {} writes ({} P2PDMA, {} "
      "nvidia-fs, {} POSIX)",
      reads, p2p, nvfs, posix, writes, wp2p, wnvfs, wposix);
#else
  return "cuFile statistics API not in the cufile.h this build used";
#endif
}

}  // namespace kvtier
