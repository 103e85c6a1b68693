// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The cuFile shim: dlopen of libcufile.so.0 so one binary starts on machines without it, typed
// against the real cufile.h.
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

#include "api/try.hpp"
#include "common/posix.hpp"
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

// Every cuFile call other than reads and writes (driver open and properties, buffer and handle
// registration, statistics) in the process runs under this lock, one at a time. An engine of
// several parts (a TP-free store's head groups) makes a context per part on threads of their own,
// and cuFile does not promise those calls may run at once: on an H100 with CUDA 13.0 two threads in
// cuFileDriverGetProperties crashed inside libcufile (a std::map walked while changed).
std::mutex cufile_mu;

// cuFile's driver is process-wide. It is opened once and stays open for the process: reopening
// it after a close is not something cuFile promises to support. It is closed by an atexit handler,
// which runs before the CUDA runtime's own teardown (registered earlier, so run later), as cuFile
// needs CUDA alive to free its bounce buffers. Its properties are read once, when it opens.
bool driver_open = false;
CUfileDrvProps_t driver_props{};

void close_driver_at_exit() {
  if (auto api = cufile_api(); api && driver_open) (*api)->driver_close();
}

Result<CUfileDrvProps_t> driver_acquire(const CuFileApi& api) {
  std::lock_guard lock(cufile_mu);
  if (driver_open) return driver_props;
  KVTIER_TRY(cufile_status(api.driver_open(), "cuFileDriverOpen"));
  driver_open = true;
  // cuFile's statistics are left to its own configuration (profile.cufile_stats, 0 by default):
  // kept per I/O inside libcufile, that bookkeeping has crashed processes of several I/O threads
  // (cuda-python #1338, kvikio #497), and it reports on a run rather than serving one.
  std::atexit(close_driver_at_exit);
  KVTIER_TRY(cufile_status(api.driver_get_properties(&driver_props), "cuFileDriverGetProperties"));
  return driver_props;
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
  /// A registered file, and its owner's hold on it (kept open while registered).
  struct Handle {
    CUfileHandle_t handle;
    std::string path;
    std::shared_ptr<const void> keep_open;
  };

  const CuFileApi* api = nullptr;
  Gpu gpu;
  GdsMode mode;
  std::vector<std::shared_ptr<std::byte>> memory;  // freed after being deregistered below
  std::vector<bool> registered;
  std::unique_ptr<StagingPool> pool;  // over `memory`, once all of it is registered
  std::mutex mu;
  std::unordered_map<int, Handle> handles;  // by fd

  ~Impl() {
    if (gpu.make_current) (void)gpu.make_current();
    std::lock_guard lock(cufile_mu);
    for (auto& [fd, entry] : handles) api->handle_deregister(entry.handle);
    for (size_t i = 0; i < memory.size(); ++i) {
      if (registered[i]) api->buf_deregister(memory[i].get());
    }
  }
};

GdsContext::GdsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GdsContext::~GdsContext() = default;

Result<std::unique_ptr<GdsContext>> GdsContext::create(Gpu gpu, size_t buffers,
                                                       size_t buffer_bytes) {
  KVTIER_ASSIGN_OR_RETURN(const CuFileApi* api, cufile_api());
  auto impl = std::make_unique<Impl>();
  impl->api = api;
  impl->gpu = std::move(gpu);
  KVTIER_TRY(impl->gpu.make_current());
  KVTIER_ASSIGN_OR_RETURN(const CUfileDrvProps_t props, driver_acquire(*api));
  impl->mode = mode_of(props);
  for (size_t i = 0; i < buffers; ++i) {
    KVTIER_ASSIGN_OR_RETURN(std::shared_ptr<std::byte> memory, impl->gpu.allocate(buffer_bytes));
    impl->memory.push_back(memory);
    impl->registered.push_back(false);
    std::lock_guard lock(cufile_mu);
    KVTIER_TRY(
        cufile_status(api->buf_register(memory.get(), buffer_bytes, 0), "cuFileBufRegister"));
    impl->registered.back() = true;
  }
  std::vector<std::span<std::byte>> slots;
  for (const auto& m : impl->memory) slots.emplace_back(m.get(), buffer_bytes);
  impl->pool = std::make_unique<StagingPool>(std::move(slots), buffer_bytes);
  return std::unique_ptr<GdsContext>(new GdsContext(std::move(impl)));
}

const GdsMode& GdsContext::mode() const { return impl_->mode; }
StagingPool& GdsContext::buffers() { return *impl_->pool; }

Status GdsContext::attach(int fd, const std::string& path, std::shared_ptr<const void> keep_open) {
  std::lock_guard lock(impl_->mu);
  if (impl_->handles.contains(fd)) return {};
  std::lock_guard registering(cufile_mu);
  // Files their owner has since let go of (segments the store evicted) are held open only by this
  // map: deregister and let them go, so their disk space comes back (the caller holds every file it
  // is using, so none of those goes, and no fd in the map is closed and reused while there).
  for (auto it = impl_->handles.begin(); it != impl_->handles.end();) {
    if (it->second.keep_open.use_count() == 1) {
      impl_->api->handle_deregister(it->second.handle);
      it = impl_->handles.erase(it);
    } else {
      ++it;
    }
  }
  CUfileDescr_t descr{};
  descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  descr.handle.fd = fd;
  CUfileHandle_t handle{};
  Status st = cufile_status(impl_->api->handle_register(&handle, &descr),
                            fmt::format("cuFileHandleRegister({})", path));
  if (!st.ok() && st.native_error() == CU_FILE_HANDLE_NOT_REGISTERED) {
    // Seen where the machine has no udev database: cuFile looks up the block device's
    // ID_FS_USAGE through libudev and gives up. Say what is missing.
    return st.with_context(
        "cuFile could not identify the filesystem's block device (is udev's database, "
        "/run/udev/data, populated for it?)");
  }
  if (!st.ok()) return st;
  impl_->handles.emplace(fd, Impl::Handle{handle, path, std::move(keep_open)});
  return {};
}

// cuFileRead or cuFileWrite of [offset, offset + bytes) against `buffer`, looping over short
// transfers.
Status GdsContext::transfer(int fd, std::byte* buffer, uint64_t offset, size_t bytes, bool write) {
  CUfileHandle_t handle;
  std::string path;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->handles.find(fd);
    if (it == impl_->handles.end())
      return {ErrorCode::kInternal, "GDS I/O on a file that was not attached"};
    handle = it->second.handle;
    path = it->second.path;
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
    if (n == -1) return posix_error(errno, fmt::format("{} of {}", what, path));
    if (n < 0) {
      return Status(ErrorCode::kIo, fmt::format("{} of {}: cuFile error {}", what, path, -n),
                    static_cast<int>(-n));
    }
    if (n == 0) {
      return write ? Status(ErrorCode::kIo, fmt::format("cuFileWrite of {} wrote nothing", path))
                   : Status(ErrorCode::kCorrupt,
                            "segment file ends before a record does (short GDS read)");
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Status GdsContext::read(int fd, std::byte* buffer, uint64_t offset, size_t bytes) {
  return transfer(fd, buffer, offset, bytes, /*write=*/false);
}

Status GdsContext::write(int fd, std::byte* buffer, uint64_t offset, size_t bytes) {
  return transfer(fd, buffer, offset, bytes, /*write=*/true);
}

std::string GdsContext::io_counts() const {
#ifdef CUFILE_GPU_UUID_LEN
  if (impl_->api->stats_l3 == nullptr) return "cuFile statistics API not in this libcufile";
  auto stats = std::make_unique<CUfileStatsLevel3_t>();
  std::lock_guard lock(cufile_mu);
  if (impl_->api->stats_l3(stats.get()).err != CU_FILE_SUCCESS)
    return "cuFile statistics off (profile.cufile_stats 3 in cuFile's configuration turns them on)";
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
