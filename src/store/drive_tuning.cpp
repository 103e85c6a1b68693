// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/drive_tuning.hpp"

#include <unistd.h>

#include <functional>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/try.hpp"

namespace kvtier {

namespace {
constexpr uint64_t kPage = 4096;
constexpr uint64_t kMostInFlight = 1024;
}  // namespace

Result<std::optional<DriveTuning>> read_drive_tuning(FileSystem& fs, const std::string& dir) {
  const std::string path = fmt::format("{}/{}", dir, kTuningName);
  auto text = read_file(fs, path);
  if (!text && text.error().code() == ErrorCode::kNotFound) return std::optional<DriveTuning>{};
  if (!text) return fail(text.error());
  DriveTuning t;
  try {
    const auto j = nlohmann::json::parse(*text);
    if (j.at("format") != "kvtier-drive-tuning") {
      return fail(ErrorCode::kCorrupt, path + ": not a kvtier drive tuning");
    }
    if (j.contains("failed")) {
      t.failed = j.at("failed").get<std::string>();
      t.failed_at = j.at("failed_at").get<int64_t>();
      if (t.failed.empty() || t.failed_at <= 0) {
        return fail(ErrorCode::kCorrupt, path + ": a failed probe's record without its reason");
      }
      return std::optional<DriveTuning>{t};
    }
    t.request_bytes = j.at("request_bytes").get<uint64_t>();
    const auto in_flight = j.at("in_flight").get<uint64_t>();
    if (in_flight == 0 || in_flight > kMostInFlight) {
      return fail(ErrorCode::kCorrupt,
                  fmt::format("{}: {} requests in flight is not a read pattern", path, in_flight));
    }
    t.in_flight = static_cast<uint32_t>(in_flight);
    t.bytes_per_second = j.at("bytes_per_second").get<double>();
    t.probed_file = j.value("probed_file", "");
    t.probed_at = j.value("probed_at", "");
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kCorrupt, fmt::format("{} unreadable: {}", path, e.what()));
  }
  if (t.request_bytes == 0 || t.request_bytes % kPage != 0 || t.request_bytes > (1u << 30) ||
      t.in_flight == 0) {
    return fail(ErrorCode::kCorrupt,
                fmt::format("{}: {} bytes x {} in flight is not a read pattern", path,
                            t.request_bytes, t.in_flight));
  }
  return std::optional<DriveTuning>{t};
}

Status write_drive_tuning(FileSystem& fs, const std::string& dir, const DriveTuning& t) {
  nlohmann::ordered_json j = {{"format", "kvtier-drive-tuning"}};
  if (!t.failed.empty()) {
    j["failed"] = t.failed;
    j["failed_at"] = t.failed_at;
    j["probed_file"] = t.probed_file;
    j["probed_at"] = t.probed_at;
  } else {
    j["request_bytes"] = t.request_bytes;
    j["in_flight"] = t.in_flight;
    j["bytes_per_second"] = t.bytes_per_second;
    j["probed_file"] = t.probed_file;
    j["probed_at"] = t.probed_at;
  }
  const std::string text = j.dump(1) + "\n";
  // Every rank of a TP-free model keeps its drives' tunings in one directory: a temporary file of
  // this process and thread, so that two writers never write into one.
  const std::string tmp = fmt::format("{}.{}.{}.tmp", kTuningName, ::getpid(),
                                      std::hash<std::thread::id>{}(std::this_thread::get_id()));
  return write_file_atomic(fs, dir, kTuningName,
                           {reinterpret_cast<const std::byte*>(text.data()), text.size()}, tmp);
}

}  // namespace kvtier
