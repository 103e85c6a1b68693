// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/tuning.hpp"

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "api/try.hpp"
#include "store/drive_tuning.hpp"

namespace kvtier {

namespace {

constexpr const char* kOffline = "not tuned: the drive is offline";
constexpr uint64_t kPage = 4096;  // requests and staging shares are whole pages (O_DIRECT)

std::mutex config_mu;
std::optional<TuningConfig> config_override;

TuningConfig tuning_config() {
  std::lock_guard lock(config_mu);
  return config_override.value_or(TuningConfig{});
}

std::string utc_now() {
  return fmt::format(
      "{:%Y-%m-%dT%H:%M:%SZ}",
      fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

DriveTuningInfo info_of(const std::string& dir, const DriveTuning& t, std::string state) {
  return {dir, t.request_bytes, t.in_flight, t.bytes_per_second, std::move(state)};
}

/// Held while a drive is probed. A deployment's ranks open their stores at once, each with its own
/// rank directory on the same drives: probed by two at once, a drive would show each half of
/// itself. The lock file in the drive's root (`depth` directories above the store's: its rank or
/// head-group directory) lets one store probe a drive at a time; where it cannot be had (a root
/// that may not be written, a wait past a minute) the probe runs anyway.
std::unique_ptr<File> lock_drive(FileSystem& fs, const std::string& store_dir, uint32_t depth) {
  std::filesystem::path root(store_dir);
  for (uint32_t i = 0; i < depth; ++i) root = root.parent_path();
  const std::string path = (root / ".kvtier-probe.lock").string();
  auto file = fs.open(path, O_RDWR | O_CREAT);
  if (!file) return nullptr;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!(*file)->try_lock(LockMode::kExclusive).ok()) {
    if (std::chrono::steady_clock::now() > give_up) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::move(*file);
}

/// A drive's state while its failed probe's record stands.
std::string failed_state(const DriveTuning& failed, const TuningConfig& config) {
  return fmt::format(
      "not tuned: probe failed at {} ({}); probed again at an open from {} s after, or by tune",
      failed.probed_at, failed.failed, config.retry_failed_after_seconds);
}

/// Where a drive's tuning is kept: one level above the store's directory on it, where every store
/// the deployment's ranks read at once has its own: the root of a per-rank store
/// (root/rank<R>of<W>), the model's directory of a TP-free store (kvtier2/<model>/<part>). So every
/// rank, and every part of a TP-free model at any TP size, reads the drive with one tuning from
/// one probe.
std::string tuning_dir(const std::string& store_dir) {
  return std::filesystem::path(store_dir).parent_path().string();
}

/// Probes `sample`'s largest segment; the tuning found, or why there is none.
Result<DriveTuning> probe_drive(const DriveSample& sample, const TuningConfig& config) {
  ProbeConfig probe = config.probe;
  probe.path = IoPath::kDirect;
  probe.max_staging_bytes = std::min(probe.max_staging_bytes, sample.largest_written);
  const uint64_t file_bytes = sample.largest_written / 4096 * 4096;
  // The file is open with O_DIRECT: an engine falling back from io_uring to pread still reads it
  // past the page cache, as a restore on this machine would.
  Result<ProbeReport> got = fail(ErrorCode::kInternal, "not run");
  try {
    got = probe_read_patterns(sample.largest->fd.get(), file_bytes, probe);
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kNoSpace, fmt::format("no host memory for the probe's {} MiB of buffers",
                                                 probe.max_staging_bytes >> 20));
  }
  if (!got) return fail(got.error());
  const ProbeReport& report = *got;
  double rate = 0;
  for (const PatternRate& r : report.rates) {
    if (r.pattern == report.best) rate = std::max(rate, r.bytes_per_second);
  }
  return DriveTuning{report.best.request_bytes, report.best.in_flight, rate, sample.largest->path,
                     utc_now()};
}

}  // namespace

void set_tuning_config_for_testing(std::optional<TuningConfig> config) {
  std::lock_guard lock(config_mu);
  config_override = std::move(config);
}

std::vector<DriveTuningInfo> tune_drives(Store& store, TuneMode mode, const Logger& log) {
  const TuningConfig config = tuning_config();
  // At open, a segment three-quarters written also counts: a store over several drives has
  // segments sized to spread a session, which may be smaller than min_written_bytes (and a sealed
  // segment is never written to its last byte), and it would otherwise never be probed.
  const uint64_t enough = mode == TuneMode::kProbeAll
                              ? config.min_written_bytes_on_request
                              : std::min(config.min_written_bytes, store.segment_bytes() / 4 * 3);
  FileSystem& fs = store.file_system();
  std::vector<DriveTuningInfo> out;
  for (const DriveSample& sample : store.drive_samples()) {
    if (!sample.available) {
      out.push_back({sample.dir, 0, 0, 0, kOffline});
      continue;
    }
    const std::string kept_in = tuning_dir(sample.dir);
    std::optional<DriveTuning> kept;
    std::optional<DriveTuning> failed;  // a probe that failed, recorded
    std::string why_untuned = "not tuned yet";
    if (auto read = read_drive_tuning(fs, kept_in)) {
      if (*read && !(*read)->failed.empty()) {
        failed = *read;
      } else {
        kept = *read;
      }
    } else {
      why_untuned = "not tuned: " + read.error().message();
      KVTIER_LOG(log, kWarn, "drive tuning: {}; the drive counts as not tuned",
                 read.error().message());
    }
    const int64_t now = unix_now();
    auto due = [&](const DriveTuning& f) {
      return now - f.failed_at >= config.retry_failed_after_seconds;
    };
    const bool retry_due = !failed || due(*failed);
    if (failed) {
      why_untuned = failed_state(*failed, config);
    }
    const bool probe =
        mode == TuneMode::kProbeAll || (mode == TuneMode::kProbeUntuned && !kept && retry_due);
    if (!probe) {
      out.push_back(kept ? info_of(sample.dir, *kept, "kept")
                         : DriveTuningInfo{sample.dir, 0, 0, 0, why_untuned});
      continue;
    }
    std::string skip;
    if (!sample.unwritable.empty()) {
      skip = "its tuning could not be kept: " + sample.unwritable;
    } else if (Status writable = fs.check_writable(kept_in); !writable.ok()) {
      // Probed, a drive whose tuning cannot be kept would be read again at every open.
      skip = "its tuning could not be kept: " + writable.message();
    } else if (!sample.largest || sample.largest_written < enough) {
      skip = fmt::format("holds no segment with {} MiB written yet", enough >> 20);
    } else if (!sample.largest->direct) {
      skip = "the store reads it through the page cache, which a probe cannot measure";
    }
    if (!skip.empty()) {
      out.push_back(kept ? info_of(sample.dir, *kept, "kept (" + skip + ")")
                         : DriveTuningInfo{sample.dir, 0, 0, 0, "not tuned: " + skip});
      continue;
    }
    const std::unique_ptr<File> held = lock_drive(fs, sample.dir, store.dir_depth());
    if (mode != TuneMode::kProbeAll && !kept) {
      // Another rank of the model may have probed the drive while this one waited for it: what it
      // found is kept, and a failure it recorded is not tried again before its time.
      auto now_kept = read_drive_tuning(fs, kept_in);
      if (now_kept && *now_kept && (*now_kept)->failed.empty()) {
        out.push_back(info_of(sample.dir, **now_kept, "kept"));
        continue;
      }
      if (now_kept && *now_kept && !due(**now_kept)) {
        out.push_back({sample.dir, 0, 0, 0, failed_state(**now_kept, config)});
        continue;
      }
    }
    auto found = probe_drive(sample, config);
    if (!found) {
      KVTIER_LOG(log, kWarn, "drive tuning: probing {} failed ({}); {}", sample.dir,
                 found.error().message(),
                 kept ? "its earlier tuning stays"
                      : fmt::format("it is read with the defaults, and probed again at an open "
                                    "{} s from now or by tune",
                                    config.retry_failed_after_seconds));
      if (!kept) {
        // Kept, so that a drive that keeps failing is not read by every open; a record that
        // cannot be written only means the next open tries again.
        const DriveTuning record{0,  0, 0, sample.largest->path, utc_now(), found.error().message(),
                                 now};
        if (Status st = write_drive_tuning(fs, kept_in, record); !st.ok()) {
          KVTIER_LOG(log, kWarn, "drive tuning: {}'s failed probe could not be recorded: {}",
                     sample.dir, st.message());
        }
      }
      out.push_back(
          kept ? info_of(sample.dir, *kept, "kept (probe failed: " + found.error().message() + ")")
               : DriveTuningInfo{sample.dir, 0, 0, 0,
                                 "not tuned: probe failed: " + found.error().message()});
      continue;
    }
    if (Status kept_now = write_drive_tuning(fs, kept_in, *found); !kept_now.ok()) {
      KVTIER_LOG(log, kWarn, "drive tuning: {} found {} KiB x {} but could not keep it: {}",
                 sample.dir, found->request_bytes >> 10, found->in_flight, kept_now.message());
    }
    KVTIER_LOG(log, kInfo, "drive tuning: {} reads best as {} KiB x {} in flight ({:.2f} GB/s)",
               sample.dir, found->request_bytes >> 10, found->in_flight,
               found->bytes_per_second / 1e9);
    out.push_back(info_of(sample.dir, *found, "probed"));
  }
  return out;
}

IoSettings io_from_tuning(std::vector<DriveTuningInfo> drives, const Options& resolved) {
  IoSettings s{resolved.io_request_bytes, resolved.staging_bytes, "defaults", {}};
  std::map<uint64_t, size_t> votes;
  size_t tuned = 0, available = 0;
  for (const DriveTuningInfo& d : drives) {
    if (d.state != kOffline) ++available;
    if (d.request_bytes == 0) continue;
    ++votes[d.request_bytes];
    ++tuned;
  }
  if (tuned > 0) {
    uint64_t request = 0;
    size_t most = 0;
    for (const auto& [size, n] : votes) {  // ascending: a tie keeps the smaller size
      if (n > most) {
        request = size;
        most = n;
      }
    }
    uint64_t in_flight = 0;
    for (const DriveTuningInfo& d : drives) {
      if (d.request_bytes == 0) continue;
      in_flight += std::max<uint64_t>(1, (d.request_bytes * d.in_flight + request - 1) / request);
    }
    const double mean = static_cast<double>(in_flight) / static_cast<double>(tuned);
    in_flight += static_cast<uint64_t>(mean + 0.5) * (std::max(available, tuned) - tuned);
    const uint64_t cap = kMaxTunedStaging;
    s.request_bytes = request;
    const uint64_t largest = std::max(cap / request, uint64_t{1}) * request;
    // Two slots at least: the staging pool gives each running operation one slot or more, so with
    // a single slot a save would wait for a whole restore.
    s.staging_bytes = std::min(request * std::max<uint64_t>(in_flight, 2), largest);
    s.source = "tuned";
  }
  s.drives = std::move(drives);
  return s;
}

uint64_t request_that_fits(uint64_t request, uint64_t count, uint32_t stores, uint64_t bound) {
  const uint64_t each = std::max<uint64_t>(count, 1) * std::max<uint32_t>(stores, 1);
  if (each * request <= bound) return request;
  return std::max(kPage, bound / each / kPage * kPage);
}

StoreShare tuned_share(uint64_t staging, uint64_t request, uint32_t stores) {
  stores = std::max<uint32_t>(stores, 1);
  request = request_that_fits(request, 2, stores, kMaxTunedStaging);
  const uint64_t each = stores * request;
  uint64_t requests = (staging + each - 1) / each;
  if (requests * each > kMaxTunedStaging) requests = kMaxTunedStaging / each;
  return {request, std::max<uint64_t>(requests, 2) * request};
}

StoreShare split_share(uint64_t staging, uint64_t request, uint32_t stores) {
  stores = std::max<uint32_t>(stores, 1);
  request = request_that_fits(request, 1, stores, staging);
  return {request, std::max(request, staging / stores / kPage * kPage)};
}

void share_tuned_settings(IoSettings& s, uint32_t stores) {
  const StoreShare each = tuned_share(s.staging_bytes, s.request_bytes, stores);
  const std::string smaller =
      each.request_bytes < s.request_bytes
          ? fmt::format(", in requests of {} where it found {}", size_text(each.request_bytes),
                        size_text(s.request_bytes))
          : "";
  s.source += stores > 1
                  ? fmt::format(
                        " (the drives' {} in flight from each rank, over the {} stores it "
                        "reads: {} each{})",
                        size_text(s.staging_bytes), stores, size_text(each.staging_bytes), smaller)
                  : fmt::format(" (the drives' {} in flight from each rank)",
                                size_text(each.staging_bytes));
  s.request_bytes = each.request_bytes;
  s.staging_bytes = each.staging_bytes * stores;
}

}  // namespace kvtier
