// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "cli_common.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "common/posix.hpp"

namespace kvtier::cli {
namespace {

Result<uint64_t> size_flag(const std::string& text, const char* name) {
  auto v = parse_size(text);
  if (!v) return fail(v.error().with_context(fmt::format("--{}", name)));
  return v;
}

/// MemAvailable: the kernel's estimate of what can be allocated without swapping, page cache it
/// can drop included.
std::optional<uint64_t> mem_available() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

Status check_host_memory(uint64_t bytes, std::string_view what) {
  const std::optional<uint64_t> available = mem_available();
  if (!available || bytes <= *available) return {};
  return {
      ErrorCode::kNoSpace,
      fmt::format(
          "{} need {} of host memory, more than the {} available (MemAvailable in /proc/meminfo)",
          what, human_bytes(static_cast<double>(bytes)),
          human_bytes(static_cast<double>(*available)))};
}

CLI::Validator whole_number(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [last, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || last != end || v < lo || v > hi) {
          return fmt::format("{} is not a whole number in {}..{}", text, lo, hi);
        }
        text = std::to_string(v);  // CLI11 converts with base 0: a leading zero would mean octal
        return {};
      },
      fmt::format("{}..{}", lo, hi));
}

void StoreFlags::add_to(CLI::App& app, const FlagGroups& groups) {
  app.add_option("--store", root,
                 "Store root directory (each TP rank uses rank<R>of<W>/ in it); several, "
                 "comma-separated, spread "
                 "the store over them, one per drive (capacity is per drive)")
      ->type_name("DIR");
  app.add_option("--model", model,
                 "Model preset: qwen3-coder-30b-a3b, llama-3-8b, llama-3-70b, qwen3-8b, tiny")
      ->type_name("NAME");
  // Only the type's range here: KvGeometry::validate() owns the real bounds and says them.
  const uint64_t u32 = std::numeric_limits<uint32_t>::max();
  app.add_option("--tp-rank", tp_rank, "Tensor-parallel rank of this store")
      ->transform(whole_number(0, u32));
  app.add_option("--tp-world", tp_world,
                 "Tensor-parallel world size (the store holds 1/W of each token's KV)")
      ->transform(whole_number(0, u32));
  app.add_option("--chunk-tokens", chunk_tokens, "Tokens per key (prefix-match granularity)")
      ->transform(whole_number(0, u32));
  // The size options keep "0" (the engine's default, which KVTIER_* variables may replace) as
  // their value; the help shows what 0 resolves to.
  auto size = [&](const char* name, std::string& value, const char* help, const char* shown) {
    app.add_option(name, value, help)->type_name("SIZE")->default_str(shown);
  };
  if (groups.tenant) {
    app.add_option("--tenant", tenant,
                   "Tenant salt: keys of one tenant never match another's (default: none)")
        ->type_name("SALT");
  }
  if (groups.layout) {
    size("--capacity", capacity,
         "Store capacity: the most bytes of segment files; the least recently used "
         "segments are evicted to stay under it",
         "64G");
    size("--segment-size", segment,
         "Segment file size for a new store (an existing store keeps its own); auto: "
         "capacity/4, at most 1G and at least 16M",
         "auto");
  }
  if (groups.io_path) {
    app.add_option(
           "--io", io,
           "I/O path: auto (= posix), posix or direct (O_DIRECT via io_uring; buffered where the "
           "filesystem refuses O_DIRECT), buffered (page cache), gds (cuFile, for GPU memory only: "
           "the "
           "CLI's KV is in host memory, so posix), dram (posix with a DRAM tier in front, --dram)")
        ->type_name("PATH");
  }
  if (groups.io_tuning) {
    size("--request-size", request, "I/O request size", "16M");
    size("--staging", staging, "Staging memory, the bound on bytes in flight", "128M");
  }
  if (groups.dram)
    size("--dram", dram, "DRAM tier in front of the disk (0: none; 8G with --io dram)", "0");
  if (groups.remote) {
    app.add_option(
           "--remote", remote,
           "Shared remote tier: Redis Cluster seeds (or one Redis server), "
           "redis://host:port[,host:port...]; "
           "saves are written behind to it, restores read what the local store lacks from it")
        ->type_name("URI");
    app.add_option("--remote-password-env", remote_password_env,
                   "Environment variable holding the cluster's password (never printed)")
        ->type_name("NAME");
    app.add_option("--remote-password-file", remote_password_file,
                   "File holding the cluster's password")
        ->type_name("PATH");
    app.add_option("--remote-ttl", remote_ttl,
                   "Seconds records live in the cluster (0: until Redis evicts them)")
        ->transform(whole_number(0, UINT32_MAX));
  }
}

Result<Options> StoreFlags::options(bool create) const {
  Options o;
  // "a,b,c": one directory per drive; the first is where a new store keeps its index.
  for (size_t start = 0;;) {
    const size_t comma = root.find(',', start);
    std::string dir =
        root.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (dir.empty() && !root.empty()) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("--store {}: an empty directory in the list", root));
    }
    (o.root.empty() ? o.root : o.extra_roots.emplace_back()) = std::move(dir);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto g = geometry_for(model, tp_rank, tp_world, chunk_tokens);
  if (!g) return fail(g.error());
  o.geometry = *g;
  o.tenant = tenant;
  o.create_if_missing = create;
  // "dram" is the O_DIRECT path with a DRAM tier in front, not a way of reading files.
  auto path = parse_io_path(io == "dram" ? "direct" : io);
  if (!path) return fail(path.error());
  o.io_path = *path;
  const std::pair<const std::string*, uint64_t*> sizes[] = {{&capacity, &o.capacity_bytes},
                                                            {&segment, &o.segment_bytes},
                                                            {&request, &o.io_request_bytes},
                                                            {&staging, &o.staging_bytes},
                                                            {&dram, &o.dram_bytes}};
  const char* names[] = {"capacity", "segment-size", "request-size", "staging", "dram"};
  for (size_t i = 0; i < 5; ++i) {
    auto v = size_flag(*sizes[i].first, names[i]);
    if (!v) return fail(v.error());
    *sizes[i].second = *v;
  }
  if (io == "dram" && o.dram_bytes == 0) o.dram_bytes = uint64_t{8} << 30;
  o.remote.seeds = remote;
  o.remote.password_env = remote_password_env;
  o.remote.password_file = remote_password_file;
  o.remote.ttl_seconds = remote_ttl;
  return o;
}

Status make_dirs(const std::string& dir) {
  std::filesystem::path path;
  for (const std::filesystem::path& part : std::filesystem::path(dir)) {
    path /= part;
    if (part.empty() || part == "/" || part == "." || part == "..") continue;
    if (::mkdir(path.c_str(), 0700) == 0) {
      // mkdir's mode passes through the umask: set it again, as the store does for its own.
      if (::chmod(path.c_str(), 0700) != 0) return posix_error(errno, "chmod " + path.string());
      continue;
    }
    const int err = errno;
    struct stat st {};
    if (err != EEXIST || ::stat(path.c_str(), &st) != 0)
      return posix_error(err, "creating directory " + path.string());
    if (!S_ISDIR(st.st_mode))
      return {ErrorCode::kInvalidArgument, fmt::format("not a directory: {}", path.string())};
  }
  return {};
}

Status check_store_root(const std::string& root) {
  // The nearest existing ancestor that is not a directory is the one to name.
  for (std::filesystem::path p = root; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return {};
      return {ErrorCode::kInvalidArgument, fmt::format("not a directory: {}", p.string())};
    }
    if (p == p.parent_path()) break;
  }
  return {};
}

int exit_code(const Status& status) {
  const int code = static_cast<int>(status.code());
  if (code >= 100 && code < 200) return 2;
  if (code >= 200 && code < 300) return 3;
  if (code >= 300 && code < 400) return 4;
  return 70;
}

int report(const Status& status, std::string_view what) {
  std::fprintf(stderr, "kvtier: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               status.to_string().c_str());
  return exit_code(status);
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return fmt::format("{:.2f} {}", bytes, units[u]);
}

Progress::Progress(std::string label) : label_(std::move(label)), tty_(::isatty(2) != 0) {}

void Progress::update(uint64_t done, uint64_t total) {
  const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
  if (percent == last_percent_) return;
  // Without a terminal, print every 25% so logs show the run is alive without flooding.
  if (!tty_ && percent % 25 != 0 && percent != 100) return;
  last_percent_ = percent;
  std::fprintf(stderr, tty_ ? "\r%s: %3d%%" : "%s: %3d%%\n", label_.c_str(), percent);
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && last_percent_ >= 0) std::fprintf(stderr, "\n");
}

}  // namespace kvtier::cli
