// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "metrics/pcie.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace kvtier::metrics {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double UnwrappedCounter::add(uint64_t raw) {
  const uint64_t mask = bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits_) - 1;
  raw &= mask;
  if (!first_) total_ += static_cast<double>((raw - last_) & mask);
  first_ = false;
  last_ = raw;
  return total_;
}

namespace {

// The NVML C ABI, declared from its documentation (nvml.h is not needed to build).
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kFieldPcieRxBytes = 198;  // NVML_FI_DEV_PCIE_COUNT_RX_BYTES
constexpr int kPcieUtilRxBytes = 1;          // NVML_PCIE_UTIL_RX_BYTES
struct NvmlFieldValue {                      // nvmlFieldValue_t
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;  // 1 unsigned int, 2 unsigned long, 3 unsigned long long
  int nvml_return;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};
static_assert(sizeof(NvmlFieldValue) == 40);

struct Nvml {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*field_values)(NvmlDevice, int, NvmlFieldValue*) = nullptr;
  int (*throughput)(NvmlDevice, int, unsigned*) = nullptr;

  std::string why(int rc) const {
    return error_string != nullptr ? error_string(rc) : fmt::format("error {}", rc);
  }
  ~Nvml() {
    if (shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
};

template <typename F>
bool bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

class NvmlSampler final : public PcieRxSampler {
 public:
  NvmlSampler(std::unique_ptr<Nvml> nvml, std::vector<NvmlDevice> devices, bool counter,
              std::chrono::microseconds period)
      : nvml_(std::move(nvml)), devices_(std::move(devices)), counter_(counter), period_(period) {
    totals_.resize(devices_.size());
    thread_ = std::thread([this] { run(); });
  }
  ~NvmlSampler() override {
    stop_ = true;
    thread_.join();
  }

  std::string source() const override {
    return counter_
               ? fmt::format("NVML PCIe RX byte counter, {} GPU(s), sampled every {} us",
                             devices_.size(), period_.count())
               : fmt::format(
                     "NVML PCIe RX throughput (20 ms averages; no byte counter in this driver), "
                     "{} GPU(s)",
                     devices_.size());
  }

  Result<double> bytes_in_window(double t0, double t1) const override {
    std::lock_guard lock(mu_);
    return delta_in_window(samples_, t0, t1);
  }

  double sample_interval() const override {
    std::lock_guard lock(mu_);
    std::vector<double> gaps;
    for (size_t i = 1; i < samples_.size(); ++i) gaps.push_back(samples_[i].t - samples_[i - 1].t);
    return median(std::move(gaps)).value_or(0);
  }

 private:
  // One reading of all GPUs; false when a reading failed (the sample is skipped).
  bool read(double& total) {
    total = 0;
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (counter_) {
        NvmlFieldValue v{};
        v.field_id = kFieldPcieRxBytes;
        if (nvml_->field_values(devices_[i], 1, &v) != kNvmlSuccess ||
            v.nvml_return != kNvmlSuccess)
          return false;
        const bool wide = v.value_type == 2 || v.value_type == 3;
        if (!totals_[i]) totals_[i].emplace(wide ? 64 : 32);
        total += totals_[i]->add(wide ? v.value.ull : v.value.ui);
      } else {
        unsigned kb_per_s = 0;
        if (nvml_->throughput(devices_[i], kPcieUtilRxBytes, &kb_per_s) != kNvmlSuccess)
          return false;
        rates_.resize(devices_.size());
        rates_[i] = kb_per_s * 1024.0;
        total += rates_[i];
      }
    }
    return true;
  }

  void run() {
    double integral = 0, last_t = 0;
    while (!stop_) {
      double value = 0;
      const bool ok = read(value);
      const double t = steady_seconds();
      if (ok) {
        if (!counter_) {  // value is a rate: integrate it over the time since the last sample
          if (last_t > 0) integral += value * (t - last_t);
          last_t = t;
          value = integral;
        }
        std::lock_guard lock(mu_);
        samples_.push_back({t, value});
      }
      std::this_thread::sleep_for(period_);
    }
  }

  std::unique_ptr<Nvml> nvml_;
  std::vector<NvmlDevice> devices_;
  bool counter_;
  std::chrono::microseconds period_;
  std::vector<std::optional<UnwrappedCounter>> totals_;
  std::vector<double> rates_;
  mutable std::mutex mu_;
  std::vector<Sample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<PcieRxSampler>> PcieRxSampler::start(std::vector<std::string> pci_bus_ids,
                                                            std::chrono::microseconds period) {
  auto nvml = std::make_unique<Nvml>();
  nvml->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml->lib == nullptr)
    return fail(ErrorCode::kNotSupported, fmt::format("NVML not loaded: {}", dlerror()));
  int (*init)() = nullptr;
  if (!bind(nvml->lib, "nvmlInit_v2", init) ||
      !bind(nvml->lib, "nvmlDeviceGetHandleByPciBusId_v2", nvml->by_bus_id) ||
      !bind(nvml->lib, "nvmlDeviceGetPcieThroughput", nvml->throughput)) {
    return fail(ErrorCode::kNotSupported,
                "NVML lacks nvmlInit_v2 / nvmlDeviceGetHandleByPciBusId_v2");
  }
  bind(nvml->lib, "nvmlErrorString", nvml->error_string);
  bind(nvml->lib, "nvmlDeviceGetFieldValues", nvml->field_values);
  if (const int rc = init(); rc != kNvmlSuccess) {
    return fail(ErrorCode::kNotSupported, fmt::format("nvmlInit: {}", nvml->why(rc)));
  }
  bind(nvml->lib, "nvmlShutdown", nvml->shutdown);
  std::set<std::string> unique(pci_bus_ids.begin(), pci_bus_ids.end());
  std::vector<NvmlDevice> devices;
  for (const std::string& id : unique) {
    NvmlDevice d = nullptr;
    if (const int rc = nvml->by_bus_id(id.c_str(), &d); rc != kNvmlSuccess) {
      return fail(ErrorCode::kNotSupported,
                  fmt::format("NVML has no GPU at PCI {}: {}", id, nvml->why(rc)));
    }
    devices.push_back(d);
  }
  if (devices.empty()) return fail(ErrorCode::kInvalidArgument, "no GPU to sample");
  bool counter = nvml->field_values != nullptr;
  for (NvmlDevice d : devices) {
    NvmlFieldValue v{};
    v.field_id = kFieldPcieRxBytes;
    counter =
        counter && nvml->field_values(d, 1, &v) == kNvmlSuccess && v.nvml_return == kNvmlSuccess;
  }
  return std::unique_ptr<PcieRxSampler>(
      new NvmlSampler(std::move(nvml), std::move(devices), counter, period));
}

}  // namespace kvtier::metrics
