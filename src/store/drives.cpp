// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/drives.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "common/posix.hpp"
#include "store/segment.hpp"

namespace kvtier {
namespace {

std::string new_id() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

struct Marker {
  std::string store;
  std::string drive;
};

Result<Marker> parse_marker(const std::string& path, const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != "kvtier-drive")
      return fail(ErrorCode::kCorrupt, path + ": not a kvtier drive marker");
    return Marker{j.at("store").get<std::string>(), j.at("drive").get<std::string>()};
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kCorrupt, fmt::format("{} unreadable: {}", path, e.what()));
  }
}

struct Members {
  std::string store;
  std::vector<std::string> drives;  // [0] is the home
};

Result<Members> read_members(FileSystem& fs, const std::string& home) {
  const std::string path = fmt::format("{}/{}", home, kDrivesName);
  auto text = read_file(fs, path);
  if (!text && text.error().code() == ErrorCode::kNotFound) return Members{};
  if (!text) return fail(text.error());
  try {
    auto j = nlohmann::json::parse(*text);
    if (j.at("format") != "kvtier-drives")
      return fail(ErrorCode::kCorrupt, path + ": not a kvtier drive list");
    return Members{j.at("store").get<std::string>(),
                   j.at("drives").get<std::vector<std::string>>()};
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kCorrupt, fmt::format("{} unreadable: {}", path, e.what()));
  }
}

Status write_json(FileSystem& fs, const std::string& dir, const char* name,
                  const nlohmann::json& j) {
  const std::string image = j.dump(2) + "\n";
  return write_file_atomic(fs, dir, name, std::as_bytes(std::span(image)));
}

Status write_members(FileSystem& fs, const std::string& home, const Members& m) {
  return write_json(fs, home, kDrivesName,
                    {{"format", "kvtier-drives"}, {"store", m.store}, {"drives", m.drives}});
}

/// What one listed directory other than the home turned out to be.
struct Probe {
  std::string dir;
  std::optional<Marker> marker;
  bool missing = false;  // the rank directory does not exist
  std::string problem;   // unreachable, and why
};

Result<Probe> probe(FileSystem& fs, const std::string& dir, const std::string& store) {
  Probe p{dir};
  const Result<bool> found = exists(fs, dir);
  if (!found || !*found) {
    p.missing = found.has_value();
    if (!found) p.problem = found.error().to_string();
    return p;
  }
  const std::string path = fmt::format("{}/{}", dir, kDriveName);
  auto text = read_file(fs, path);
  if (text) {
    KVTIER_ASSIGN_OR_RETURN(Marker m, parse_marker(path, *text));
    if (m.store != store) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} is a drive of another store ({}), not of this one ({})", dir,
                              m.store, store.empty() ? "a one-directory store" : store));
    }
    p.marker = m;
  } else if (text.error().code() != ErrorCode::kNotFound) {
    p.problem = fmt::format("{}: {}", path, text.error().message());
  } else if (auto segs = list_segments(dir, fs); !segs) {
    p.problem = fmt::format("{}: {}", dir, segs.error().message());
  } else if (!segs->empty()) {
    return fail(
        ErrorCode::kCorrupt,
        fmt::format("{} holds segment files but no {}: not adding it as a drive", dir, kDriveName));
  }
  return p;
}

}  // namespace

size_t DriveSet::offline() const {
  return static_cast<size_t>(
      std::count_if(drives.begin(), drives.end(), [](const Drive& d) { return !d.available; }));
}

Result<size_t> find_home(FileSystem& fs, std::span<const std::string> rank_dirs, bool create) {
  std::vector<size_t> homes;
  std::string unreachable, other_drive;
  for (size_t i = 0; i < rank_dirs.size(); ++i) {
    const Result<bool> home = exists(fs, fmt::format("{}/MANIFEST.json", rank_dirs[i]));
    if (home && *home) {
      homes.push_back(i);
    } else if (!home) {
      unreachable += fmt::format(" {} ({})", rank_dirs[i], home.error().to_string());
    } else if (exists(fs, fmt::format("{}/{}", rank_dirs[i], kDriveName)).value_or(false)) {
      other_drive = rank_dirs[i];
    }
  }
  if (homes.size() > 1) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("{} and {} each hold a store's index: one store per list of drives",
                            rank_dirs[homes[0]], rank_dirs[homes[1]]));
  }
  if (homes.size() == 1) return homes[0];
  // A one-directory store opens as it always has (its own messages for a missing store).
  if (rank_dirs.size() == 1 && other_drive.empty()) return size_t{0};
  if (!unreachable.empty()) {
    return fail(
        ErrorCode::kNotFound,
        fmt::format("no listed directory holds the store's index, and some cannot be reached:{}",
                    unreachable));
  }
  if (!other_drive.empty()) {
    return fail(
        ErrorCode::kInvalidArgument,
        fmt::format(
            "{} is a drive of a store whose index (the drive holding MANIFEST.json and {}) is not "
            "among the directories given",
            other_drive, kDrivesName));
  }
  if (!create) return fail(ErrorCode::kNotFound, fmt::format("no store at {}", rank_dirs[0]));
  return size_t{0};
}

Result<DriveSet> open_drives(FileSystem& fs, uint32_t dir_depth, const std::string& home,
                             std::span<const std::string> others, bool read_only,
                             const Logger& log) {
  KVTIER_ASSIGN_OR_RETURN(Members members, read_members(fs, home));
  DriveSet set;
  if (others.empty() && members.drives.empty()) {
    set.drives.push_back({home});
    return set;
  }
  const bool new_list = members.drives.empty();
  if (new_list) {
    members = {new_id(), {new_id()}};
    // The store's id is durable before any drive is marked with it: a crash between a marker and
    // the list naming it leaves a marker of this store, which the next open adopts, not refuses.
    if (!read_only) KVTIER_TRY(write_members(fs, home, members));
  }
  set.store_id = members.store;
  set.drives.push_back({home, members.drives[0]});
  std::vector<Probe> probes;
  for (const std::string& dir : others) {
    KVTIER_ASSIGN_OR_RETURN(Probe p, probe(fs, dir, members.store));
    probes.push_back(std::move(p));
  }
  std::vector<std::string> found;
  for (const Probe& p : probes) {
    if (!p.marker) continue;
    if (std::find(found.begin(), found.end(), p.marker->drive) != found.end() ||
        p.marker->drive == members.drives[0]) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("{} is listed twice (drive {})", p.dir, p.marker->drive));
    }
    found.push_back(p.marker->drive);
  }
  size_t missing = 0;
  for (size_t i = 1; i < members.drives.size(); ++i) {
    missing += std::find(found.begin(), found.end(), members.drives[i]) == found.end() ? 1 : 0;
  }
  bool changed = false;
  for (Probe& p : probes) {
    if (!p.problem.empty()) {
      set.unreachable.push_back(p.problem);
      continue;
    }
    if (p.marker) {
      if (std::find(members.drives.begin(), members.drives.end(), p.marker->drive) ==
          members.drives.end()) {
        members.drives.push_back(
            p.marker->drive);  // marked, but a crash came before the list named it
        changed = true;
      }
      set.drives.push_back({p.dir, p.marker->drive});
      continue;
    }
    // Not a drive yet. A rank directory that is missing while a member drive is missing may be that
    // drive's unmounted mount point: making a new drive there would put KV on the wrong disk.
    if (read_only || (p.missing && missing > 0)) {
      set.unreachable.push_back(fmt::format(
          "{}: {}", p.dir,
          read_only
              ? "not a drive of this store, and a read-only store adds none"
              : "missing while a drive of this store is missing; not made a new drive (it may be "
                "that drive's mount point)"));
      continue;
    }
    // A new drive's directories are 0700 like the home's (KV is user data).
    if (p.missing) {
      KVTIER_TRY(make_dirs_durable(fs, p.dir, dir_depth));
    }
    const std::string id = new_id();
    KVTIER_TRY(write_json(fs, p.dir, kDriveName,
                          {{"format", "kvtier-drive"}, {"store", members.store}, {"drive", id}}));
    members.drives.push_back(id);
    set.drives.push_back({p.dir, id});
    changed = true;
    KVTIER_LOG(log, kInfo, "{}: added as drive {} of store {}", p.dir, id, members.store);
  }
  for (size_t i = 1; i < members.drives.size(); ++i) {
    if (std::find(found.begin(), found.end(), members.drives[i]) != found.end()) continue;
    if (std::any_of(set.drives.begin(), set.drives.end(),
                    [&](const Drive& d) { return d.id == members.drives[i]; }))
      continue;
    std::string why =
        fmt::format("drive {} of this store is not among the directories given", members.drives[i]);
    if (!set.unreachable.empty())
      why += fmt::format(" (unreachable: {})", fmt::join(set.unreachable, "; "));
    set.drives.push_back({.dir = "", .id = members.drives[i], .available = false, .problem = why});
    KVTIER_LOG(log, kWarn, "{}: {}; its records are misses until it is back", home, why);
  }
  if (changed && !read_only) KVTIER_TRY(write_members(fs, home, members));
  return set;
}

}  // namespace kvtier
