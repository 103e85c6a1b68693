// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The seed benchmark's independent ceiling: fio reading each request's file ranges on every rank
// and drive at once (fio_ceiling.hpp), its depth chosen on the first request.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fio_ceiling.hpp"
#include "samplers.hpp"

namespace kvtier::seed {

/// @brief fio for one seed run. A failure never stops the benchmark: it is said once on the
/// console and kept in json(), and a run where fio never ran has no FIO column. Not thread-safe.
class SeedFio {
 public:
  /// `binary` "off": no fio this run. `depth` 0: the fastest of cli::kFioDepths on the first
  /// request. `requests`: request sizes tried besides kvtier's own on the first request; the
  /// fastest size and depth found are the ceiling for the whole run (a drive's best pattern, not
  /// fio at kvtier's request size).
  SeedFio(const std::string& binary, unsigned depth, std::vector<uint64_t> requests,
          const std::string& work_dir);

  /// fio's time for the reads every rank's restore of `session` makes (page cache dropped first);
  /// nullopt when fio is off or failed.
  std::optional<cli::FioRead> measure(std::vector<std::unique_ptr<RankChannel>>& ranks,
                                      const nlohmann::ordered_json& session, CacheDropper& dropper);
  /// What seed.json and the table say about the ceiling.
  [[nodiscard]] const nlohmann::ordered_json& json() const { return json_; }

 private:
  Result<cli::FioRead> read(std::vector<std::unique_ptr<RankChannel>>& ranks,
                            const nlohmann::ordered_json& session, CacheDropper& dropper);
  Status calibrate(const std::vector<std::vector<FileExtent>>& streams, uint64_t request);
  void failed(const Status& st);

  std::unique_ptr<cli::FioCeiling> fio_;  // null: fio off, not found, or never ran here
  unsigned depth_ = 0;
  std::vector<uint64_t> requests_;  // tried besides kvtier's
  uint64_t request_ = 0;            // the calibrated request size; 0 before calibration
  /// The fastest pattern found for each number of streams (ranks x drives): a stage of ranks of
  /// another TP size is held against fio at its own best, not at the first stage's.
  struct Pattern {
    uint64_t request = 0;
    unsigned depth = 0;
  };
  std::map<size_t, Pattern> patterns_;
  nlohmann::ordered_json json_;
  std::set<std::string> warned_;
};

}  // namespace kvtier::seed
