// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "seed_fio.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "api/try.hpp"
#include "bench.hpp"

namespace kvtier::seed {

using Json = nlohmann::ordered_json;

SeedFio::SeedFio(const std::string& binary, unsigned depth, std::vector<uint64_t> requests,
                 const std::string& work_dir)
    : depth_(depth), requests_(std::move(requests)) {
  if (binary == "off") {
    json_ = {{"error", "--fio off: no independent ceiling in this run"}};
    return;
  }
  auto found = cli::FioCeiling::find(binary, work_dir);
  if (!found) {
    std::printf(
        "WARNING: %s; ratios are then against kvtier's own raw read, not an independent ceiling\n",
        found.error().message().c_str());
    json_ = {{"error", found.error().message()}};
    return;
  }
  fio_ = std::make_unique<cli::FioCeiling>(std::move(*found));
  json_ = {{"version", fio_->version()}};
}

std::optional<cli::FioRead> SeedFio::measure(std::vector<std::unique_ptr<RankChannel>>& ranks,
                                             const Json& session, CacheDropper& dropper) {
  if (!fio_) return std::nullopt;
  auto r = read(ranks, session, dropper);
  if (r) return *r;
  failed(r.error());
  return std::nullopt;
}

Result<cli::FioRead> SeedFio::read(std::vector<std::unique_ptr<RankChannel>>& ranks,
                                   const Json& session, CacheDropper& dropper) {
  Json op = session;
  op["op"] = "extents";
  KVTIER_ASSIGN_OR_RETURN(auto replies, broadcast(ranks, op));
  std::vector<std::vector<FileExtent>> streams;
  uint64_t request = 0;
  for (const Json& r : replies) {
    request = r["request_bytes"].get<uint64_t>();
    std::vector<FileExtent> rank;
    for (const Json& x : r["extents"]) {
      rank.push_back(
          FileExtent{x[0].get<std::string>(), x[1].get<uint64_t>(), x[2].get<uint64_t>()});
    }
    for (auto& drive : cli::split_by_device(rank)) streams.push_back(std::move(drive));
  }
  const auto known = patterns_.find(streams.size());
  if (known == patterns_.end()) {
    KVTIER_TRY(dropper.drop(ranks));
    KVTIER_TRY(calibrate(streams, request));
    patterns_[streams.size()] = {request_, fio_->depth()};
  } else {
    request_ = known->second.request;
    fio_->set_depth(known->second.depth);
  }
  KVTIER_TRY(dropper.drop(ranks));
  return fio_->read(streams, request_ > 0 ? request_ : request, fio_->depth());
}

Status SeedFio::calibrate(const std::vector<std::vector<FileExtent>>& streams, uint64_t request) {
  std::vector<unsigned> depths(std::begin(cli::kFioDepths), std::end(cli::kFioDepths));
  if (depth_ > 0) depths = {depth_};
  std::vector<uint64_t> sizes{request};
  for (uint64_t r : requests_) {
    if (std::find(sizes.begin(), sizes.end(), r) == sizes.end()) sizes.push_back(r);
  }
  Json sweep = Json::array();
  std::string line;
  double best = -1;
  unsigned best_depth = 0;
  for (uint64_t size : sizes) {
    auto runs = fio_->calibrate(streams, size, depths);
    if (!runs) {
      if (size == request) return runs.error();  // kvtier's own size must be measured
      line += fmt::format(" [{}: {}]", cli::human_bytes(static_cast<double>(size)),
                          runs.error().message());
      continue;
    }
    line += fmt::format(" [{}]", cli::human_bytes(static_cast<double>(size)));
    for (const cli::FioRead& r : *runs) {
      sweep.push_back({{"request_bytes", size}, {"depth", r.depth}, {"gb_per_s", r.gbps()}});
      line += fmt::format(" {}:{:.2f}", r.depth, r.gbps());
      if (r.gbps() > best) {
        best = r.gbps();
        best_depth = r.depth;
        request_ = size;
      }
    }
  }
  fio_->set_depth(best_depth);
  Json found = {
      {"version", fio_->version()}, {"engine", fio_->engine()},        {"depth", fio_->depth()},
      {"request_bytes", request_},  {"kvtier_request_bytes", request}, {"streams", streams.size()},
      {"depth_sweep", sweep},       {"what", fio_->describe()}};
  // The first stage's is the run's ceiling; a stage with another number of streams adds its own.
  if (json_.contains("depth")) {
    json_["more_streams"].push_back(std::move(found));
  } else {
    json_ = std::move(found);
  }
  std::printf(
      "-- fio ceiling: %s, %zu streams (ranks x drives); GB/s of all streams by request size and "
      "depth per stream:%s -> %s at depth %u\n",
      fio_->version().c_str(), streams.size(), line.c_str(),
      cli::human_bytes(static_cast<double>(request_)).c_str(), fio_->depth());
  return {};
}

void SeedFio::failed(const Status& st) {
  const std::string why = st.message();
  if (!json_.contains("depth")) {  // it never ran here: no ceiling this run
    fio_.reset();
    json_ = {{"error", "fio could not measure this run: " + why}};
  } else {
    json_["failed_requests"] = json_.value("failed_requests", 0) + 1;
    json_["last_error"] = why;
  }
  if (warned_.insert(why).second) std::printf("WARNING: fio: %s\n", why.c_str());
}

}  // namespace kvtier::seed
