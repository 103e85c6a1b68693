// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "store/index_log.hpp"
#include "store/record_format.hpp"
#include "store/record_v2.hpp"

namespace kvtier {
namespace {

nlohmann::json manifest_json(const Manifest& m) {
  const KvGeometry& g = m.geometry;
  nlohmann::json j = {{"format", "kvtier-store"},
                      {"format_version", m.format_version},
                      {"model_id", g.model_id},
                      {"layers", g.layers},
                      {"kv_heads", g.kv_heads},
                      {"head_dim", g.head_dim},
                      {"element_bytes", g.element_bytes},
                      {"chunk_tokens", g.chunk_tokens},
                      {"tp_rank", g.tp_rank},
                      {"tp_world", g.tp_world},
                      {"segment_bytes", m.segment_bytes},
                      {"capacity_bytes", m.capacity_bytes.value_or(0)}};
  // Only a latent's store says it (format 2): format-1 manifests stay as they were.
  if (g.kv_tensors != 2) j["kv_tensors"] = g.kv_tensors;
  return j;
}

Result<Manifest> parse_manifest(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    if (j.at("format") != "kvtier-store")
      return fail(ErrorCode::kCorrupt, "MANIFEST.json: not a kvtier store");
    const auto version = j.at("format_version").get<uint32_t>();
    if (version != kFormatVersion && version != kFormatVersion2) {
      return fail(ErrorCode::kFormatVersion,
                  fmt::format("store format version {} (this build reads {} and {})", version,
                              kFormatVersion, kFormatVersion2));
    }
    Manifest m;
    m.format_version = version;
    m.geometry = {j.at("model_id"),      j.at("layers"),       j.at("kv_heads"), j.at("head_dim"),
                  j.at("element_bytes"), j.at("chunk_tokens"), j.at("tp_rank"),  j.at("tp_world")};
    m.geometry.kv_tensors = j.value("kv_tensors", 2u);
    m.segment_bytes = j.at("segment_bytes").get<uint64_t>();
    if (j.contains("capacity_bytes")) m.capacity_bytes = j.at("capacity_bytes").get<uint64_t>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kCorrupt, fmt::format("MANIFEST.json unreadable: {}", e.what()));
  }
}

// One directory given twice, however it is spelled (X and X/, X/., a symlink to X, a bind mount of
// X), would be two drives of one store in one place: two drive markers side by side and its

}  // namespace

std::string StoreDirectory::write_problem() const {
  for (const char* name :
       {"", kLockName, kManifestName, IndexLog::kJournalName, IndexLog::kCheckpointName}) {
    const std::string path = *name == 0 ? dir_ : fmt::format("{}/{}", dir_, name);
    const Status writable = fs_->check_writable(path);
    if (!writable.ok() && write_refused(writable.native_error())) {
      return fmt::format("{} is not writable ({})", path, std::strerror(writable.native_error()));
    }
  }
  return {};
}

Result<StoreDirectory> StoreDirectory::open(FileSystem& fs, std::string dir, bool read_only,
                                            const Logger& log) {
  StoreDirectory d;
  d.fs_ = &fs;
  d.log_ = &log;
  d.dir_ = std::move(dir);
  if (read_only) {
    d.read_only_ = true;
    d.read_only_reason_ = "opened for reading only (Options::read_only)";
    return d;
  }
  KVTIER_TRY(d.lock());
  return d;
}

Status StoreDirectory::lock() {
  const std::string path = fmt::format("{}/{}", dir_, kLockName);
  std::string problem = write_problem();
  if (problem.empty()) {
    auto fd = fs_->open(path, O_RDWR | O_CREAT);
    if (fd) {
      lock_file_ = std::move(*fd);
      return lock_exclusive(path);
    }
    if (!write_refused(fd.error().native_error())) return fd.error();
    problem = fd.error().message() + " (" + std::strerror(fd.error().native_error()) + ")";
  }
  return lock_shared(path, std::move(problem));
}

// Readers hold LOCK_SH, the writer LOCK_EX: a writer waits for readers to close, and readers for
// the writer, so a reader never sees the index change under it.
Status StoreDirectory::lock_shared(const std::string& path, std::string reason) {
  auto fd = fs_->open(path, O_RDONLY);
  if (!fd) {
    return fd.error().with_context(
        fmt::format("store {} may not be written ({}) and its lock cannot be read", dir_, reason));
  }
  lock_file_ = std::move(*fd);
  if (Status locked = lock_file_->try_lock(LockMode::kShared); !locked.ok()) {
    if (locked.native_error() != EWOULDBLOCK) return locked;
    auto holder = read_file(*fs_, path);
    return {ErrorCode::kLocked,
            fmt::format("store {} is in use by a kvtier engine that writes it{}; a read-only open "
                        "waits until it closes",
                        dir_, holder && !holder->empty() ? fmt::format(" (pid {})", *holder) : "")};
  }
  read_only_ = true;
  read_only_reason_ = std::move(reason);
  KVTIER_LOG(*log_, kWarn, "store opened read-only: {}", read_only_reason_);
  return {};
}

Status StoreDirectory::lock_exclusive(const std::string& path) {
  if (Status locked = lock_file_->try_lock(LockMode::kExclusive); !locked.ok()) {
    if (locked.native_error() != EWOULDBLOCK) return locked;
    // Only readers hold it when a shared lock can still be had.
    if (lock_file_->try_lock(LockMode::kShared).ok()) {
      lock_file_->unlock();
      return {ErrorCode::kLocked,
              fmt::format("store {} is open read-only by another process; a writer waits until "
                          "every reader has closed it",
                          dir_)};
    }
    auto holder = read_file(*fs_, path);
    std::string who = holder && !holder->empty() ? fmt::format(" (held by pid {})", *holder) : "";
    return {ErrorCode::kLocked,
            fmt::format("store {} is in use by another kvtier engine{}; each TP rank's store "
                        "takes one writer",
                        dir_, who)};
  }
  std::string pid = std::to_string(::getpid());
  KVTIER_TRY(lock_file_->truncate(0));
  return lock_file_->write_at(std::as_bytes(std::span(pid)), 0);
}

Status StoreDirectory::refuse_read_only() const {
  return {ErrorCode::kPermission, fmt::format("store opened read-only: {}", read_only_reason_)};
}

Result<std::optional<Manifest>> StoreDirectory::read_manifest() const {
  auto text = read_file(*fs_, fmt::format("{}/{}", dir_, kManifestName));
  if (!text && text.error().code() == ErrorCode::kNotFound) return std::optional<Manifest>();
  if (!text) return fail(text.error());
  KVTIER_ASSIGN_OR_RETURN(Manifest manifest, parse_manifest(*text));
  return std::optional<Manifest>(std::move(manifest));
}

Status StoreDirectory::write_manifest(const Manifest& manifest) const {
  const std::string image = manifest_json(manifest).dump(2) + "\n";
  return write_file_atomic(*fs_, dir_, kManifestName, std::as_bytes(std::span(image)));
}

void StoreDirectory::remove_stale_files() const {
  for (const char* name : {"index.ckpt.tmp", "MANIFEST.json.tmp", ".direct-io-probe"}) {
    static_cast<void>(fs_->remove(fmt::format("{}/{}", dir_, name)));
  }
}

}  // namespace kvtier
