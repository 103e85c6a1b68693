// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Fast by default: each drive's read pattern found by kvtier's read probe on the drive's own
// segment files, kept with the drive, and turned into the engine's request size and staging.
#pragma once

#include <optional>
#include <vector>

#include "common/log.hpp"
#include "io/read_probe.hpp"
#include "kvtier/options.hpp"
#include "kvtier/stats.hpp"
#include "store/store.hpp"

namespace kvtier {

struct TuningConfig {
  /// A drive is probed at open once one of its segments holds this many written bytes, or three
  /// quarters of the store's segment size where that is less: fewer is too little to see past the
  /// drive's own cache, and a store that small restores quickly anyway.
  uint64_t min_written_bytes = uint64_t{256} << 20;
  /// A drive whose probe failed (and that has no earlier tuning) is probed again at open only
  /// this long after (Engine::tune() probes it whenever asked): a drive that keeps failing does
  /// not make every open read it.
  int64_t retry_failed_after_seconds = 3600;
  /// Engine::tune() probes a drive with this much or more.
  uint64_t min_written_bytes_on_request = uint64_t{16} << 20;
  /// The sweep (request sizes larger than the file and staging beyond it are left out).
  ProbeConfig probe = [] {
    ProbeConfig c;
    c.bytes_per_trial = uint64_t{64} << 20;
    return c;
  }();
};

/// Tests shrink the sizes; nullopt restores the defaults above.
void set_tuning_config_for_testing(std::optional<TuningConfig> config);

enum class TuneMode {
  kRead,          ///< read the drives' tunings, probe nothing
  kProbeUntuned,  ///< probe drives without a tuning that hold min_written_bytes (at open)
  kProbeAll,      ///< probe every drive holding min_written_bytes_on_request (Engine::tune)
};

/// Each drive's tuning, in the store's drive order, after probing as `mode` says (writing what a
/// probe finds to the drive's TUNING.json). A probe that fails leaves the drive as it was and
/// says why in its state; nothing here fails the caller.
[[nodiscard]] std::vector<DriveTuningInfo> tune_drives(Store& store, TuneMode mode,
                                                       const Logger& log);

/// The request size and staging for `drives`' tunings: the request size most drives chose (the
/// smaller on a tie), and per available drive its requests in flight at that size (a drive not
/// tuned counts as the tuned ones' mean), so that each drive sees its own pattern when a restore
/// reads all of them; two requests at least, 1 GiB at most. `resolved`'s values (source
/// "defaults") when no drive is tuned.
[[nodiscard]] IoSettings io_from_tuning(std::vector<DriveTuningInfo> drives,
                                        const Options& resolved);

/// The most staging a tuning gives a rank.
inline constexpr uint64_t kMaxTunedStaging = uint64_t{1} << 30;

/// One store's request size and staging when a rank reads several stores at once (a TP-free
/// model's head groups, windows and state).
struct StoreShare {
  uint64_t request_bytes = 0;
  uint64_t staging_bytes = 0;
};

/// `request`, or less where `count` requests for each of `stores` stores would pass `bound`: the
/// most that fits, in whole 4 KiB (4 KiB at least). Many stores read with smaller requests rather
/// than take staging past the bound.
[[nodiscard]] uint64_t request_that_fits(uint64_t request, uint64_t count, uint32_t stores,
                                         uint64_t bound);

/// One store's share of a tuning's `staging` when a rank reads `stores` stores at once: whole
/// requests of `request`, rounded up, two at least (a staging pool of one slot makes a save wait
/// for a whole restore), rounded down where the stores together would pass kMaxTunedStaging
/// otherwise; where even two each would, smaller requests (request_that_fits). The probe timed
/// one reader, so its staging is what one reader wants in flight: each rank reads with all of
/// it, split over its stores, whatever the TP size (docs/perf.md: sharing it among the ranks read
/// 1.2-1.6x slower).
[[nodiscard]] StoreShare tuned_share(uint64_t staging, uint64_t request, uint32_t stores);

/// One store's share of a rank's `staging` as given (the defaults, or sizes asked for): an equal
/// part in whole 4 KiB, one request at least; smaller requests where one each would pass
/// `staging` (request_that_fits).
[[nodiscard]] StoreShare split_share(uint64_t staging, uint64_t request, uint32_t stores);

/// Turns `s`, a tuning's settings with the probe's whole staging, into a rank's that reads `stores`
/// stores at once: their shares (tuned_share), and a source that says so.
void share_tuned_settings(IoSettings& s, uint32_t stores);

}  // namespace kvtier
