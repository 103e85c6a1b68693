// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "samplers.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "common/posix.hpp"

namespace kvtier::seed {
namespace {

uint64_t ticks_of(const std::string& pid) {
  if (auto t = read_file("/proc/" + pid + "/stat")) {
    if (auto p = metrics::parse_process_ticks(*t)) return *p;
  }
  return 0;
}

}  // namespace

Samplers::Samplers(std::vector<std::string> devices, std::vector<pid_t> pids)
    : pids_(std::move(pids)) {
  for (auto& d : devices) {
    if (!d.empty() && std::find(devices_.begin(), devices_.end(), d) == devices_.end())
      devices_.push_back(d);
  }
  if (auto m = metrics::MemoryTraffic::open())
    memory_ = std::move(*m);
  else
    memory_note_ = m.error().message();
}

void Samplers::start_pcie(const std::vector<std::string>& bus_ids) {
  std::vector<std::string> gpus;
  for (const auto& b : bus_ids) {
    if (!b.empty()) gpus.push_back(b);
  }
  if (gpus.empty()) {
    pcie_note_ = "no GPU (KV in host memory)";
    return;
  }
  auto s = metrics::PcieRxSampler::start(gpus, std::chrono::microseconds(2000));
  if (s)
    pcie_ = std::move(*s);
  else
    pcie_note_ = s.error().message();
}

Edge Samplers::read() {
  Edge e;
  if (auto t = read_file("/proc/diskstats")) {
    for (const auto& device : devices_) {
      if (auto d = metrics::parse_diskstats(*t, device)) {
        e.disk.reads += d->reads;
        e.disk.sectors_read += d->sectors_read;
        e.disk.writes += d->writes;
        e.disk.sectors_written += d->sectors_written;
      }
    }
  }
  if (auto t = read_file("/proc/stat")) {
    if (auto c = metrics::parse_proc_stat(*t)) e.cpu = *c;
  }
  // The rank processes do kvtier's work; this one only samples (and may run the host load).
  for (pid_t p : pids_) e.kvtier_ticks += ticks_of(std::to_string(p));
  if (memory_) {
    if (auto b = memory_->bytes()) e.dram_bytes = *b;
  }
  return e;
}

std::optional<double> Samplers::pcie_bytes(double t0, double t1) const {
  if (!pcie_) return std::nullopt;
  auto b = pcie_->bytes_in_window(t0, t1);
  return b ? std::optional<double>(*b) : std::nullopt;
}

void Samplers::settle() const {
  if (pcie_) std::this_thread::sleep_for(std::chrono::milliseconds(30));
}

nlohmann::ordered_json Samplers::describe() const {
  std::string disks;
  for (const auto& d : devices_) disks += (disks.empty() ? "" : "+") + d;
  nlohmann::ordered_json d = {
      {"disk", disks.empty() ? "unknown" : disks},
      {"dram", memory_ ? memory_->source()
                       : "accounted from the data path, not measured (" + memory_note_ + ")"},
      {"dram_measured", memory_ != nullptr},
      {"pcie", pcie_ ? pcie_->source() : "not measured: " + pcie_note_}};
  // Only a sampler has an interval: 0.0 would read as one that sampled continuously.
  if (pcie_) d["pcie_sample_interval_ms"] = pcie_->sample_interval() * 1e3;
  return d;
}

CacheDropper::CacheDropper() {
  std::ofstream probe("/proc/sys/vm/drop_caches");
  global_ = probe.good();
}

Status CacheDropper::drop(std::vector<std::unique_ptr<RankChannel>>& ranks) {
  if (global_) {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
    return {};
  }
  auto r = broadcast(ranks, nlohmann::ordered_json{{"op", "drop"}});
  return r ? Status{} : r.error();
}

std::string CacheDropper::describe() const {
  return global_ ? "dropped before every request (sync; echo 3 > /proc/sys/vm/drop_caches)"
                 : "store files dropped before every request (posix_fadvise DONTNEED; not root)";
}

}  // namespace kvtier::seed
