// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "cli_common.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "common/posix.hpp"

namespace kvtier::cli {
namespace {

Result<uint64_t> size_flag(const std::string& text, const char* name) {
  auto v = parse_size(text);
  if (!v) return fail(v.error().with_context(fmt::format("--{}", name)));
  return v;
}

/// What a store's MANIFEST.json (docs/format.md) records, where one of `roots` holds one for this
/// rank: the CLI uses it to open a store without --model and to say flag problems in flags.
struct StoredStore {
  std::string manifest;
  KvGeometry geometry;
  uint64_t segment_bytes = 0;
};

Result<std::optional<StoredStore>> stored_store(const Options& o, uint32_t tp_rank,
                                                uint32_t tp_world) {
  std::vector<std::string> roots = {o.root};
  roots.insert(roots.end(), o.extra_roots.begin(), o.extra_roots.end());
  for (const std::string& root : roots) {
    const std::string path = fmt::format("{}/rank{}of{}/MANIFEST.json", root, tp_rank, tp_world);
    std::ifstream in(path);
    if (!in) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(in);
      StoredStore st{path, {}, j.at("segment_bytes").get<uint64_t>()};
      KvGeometry& g = st.geometry;
      g.model_id = j.at("model_id").get<std::string>();
      g.layers = j.at("layers").get<uint32_t>();
      g.kv_heads = j.at("kv_heads").get<uint32_t>();
      g.head_dim = j.at("head_dim").get<uint32_t>();
      g.element_bytes = j.at("element_bytes").get<uint32_t>();
      g.chunk_tokens = j.at("chunk_tokens").get<uint32_t>();
      g.tp_rank = j.at("tp_rank").get<uint32_t>();
      g.tp_world = j.at("tp_world").get<uint32_t>();
      return st;
    } catch (const nlohmann::json::exception& e) {
      return fail(ErrorCode::kCorrupt, fmt::format("{}: {}", path, e.what()));
    }
  }
  return std::optional<StoredStore>();
}

/// A symbolic link that stat cannot follow, said as such: mkdir's EEXIST ("creating directory
/// x (errno 17: File exists)") and "no store at x" both hid it. Ok when `path` is not one.
Status check_link(const std::filesystem::path& path, int stat_errno) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return {};
  if (stat_errno == ELOOP)
    return {ErrorCode::kInvalidArgument,
            fmt::format("{} is a symbolic link that loops (ELOOP): no directory at its end",
                        path.string())};
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
  return {ErrorCode::kInvalidArgument,
          fmt::format("{} is a symbolic link to '{}', which does not exist (a dangling link)",
                      path.string(), ec ? std::string("?") : target.string())};
}

/// What Options::resolved() refused, said in the flags and sizes a CLI user typed; nullopt where
/// it is none of these (the library's message then stands). Unset values are the documented
/// defaults (docs/cli.md).
std::optional<std::string> flag_problem(const Options& o) {
  constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10, kGiB = kMiB << 10;
  const uint64_t request = o.io_request_bytes ? o.io_request_bytes : 16 * kMiB;
  const uint64_t staging = o.staging_bytes ? o.staging_bytes : 128 * kMiB;
  const uint64_t capacity = o.capacity_bytes ? o.capacity_bytes : 64 * kGiB;
  const uint64_t segment =
      o.segment_bytes ? o.segment_bytes : std::max(std::min(kGiB, capacity / 4), 16 * kMiB);
  const std::pair<const char*, uint64_t> aligned[] = {{"--segment-size", o.segment_bytes},
                                                      {"--request-size", o.io_request_bytes},
                                                      {"--staging", o.staging_bytes}};
  for (const auto& [flag, v] : aligned) {
    if (v % (4 * kKiB) != 0)
      return fmt::format("{} {} is not a multiple of 4 KiB", flag, size_text(v));
  }
  if (request < 4 * kKiB || request > kGiB)
    return fmt::format("--request-size {} is not in 4 KiB..1 GiB", size_text(request));
  if (staging < request)
    return fmt::format("--staging {} is less than one request (--request-size {})",
                       size_text(staging), size_text(request));
  if (staging > 64 * kGiB) return fmt::format("--staging {} is over 64 GiB", size_text(staging));
  if (segment > capacity) {
    if (o.segment_bytes)
      return fmt::format("--segment-size {} exceeds --capacity {}", size_text(segment),
                         size_text(capacity));
    return fmt::format(
        "--capacity {} is less than one segment ({}: capacity/4, at least 16 MiB, unless "
        "--segment-size says otherwise)",
        size_text(capacity), size_text(segment));
  }
  const uint64_t record = o.geometry.bytes_for_tokens(o.geometry.chunk_tokens) + 8 * kKiB;
  if (record > segment)
    return fmt::format(
        "a chunk of {} tokens (--chunk-tokens) needs {} with its header, more than "
        "a segment ({}, --segment-size)",
        o.geometry.chunk_tokens, size_text(record), size_text(segment));
  if (o.dram_bytes != 0 && o.dram_bytes < record)
    return fmt::format("--dram {} cannot hold one chunk ({})", size_text(o.dram_bytes),
                       size_text(record));
  return std::nullopt;
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
                 "Model preset: qwen3-coder-30b-a3b, llama-3-8b, llama-3-70b, qwen3-8b, "
                 "deepseek-v3 (MLA), tiny; "
                 "left out, an existing store's own geometry (its MANIFEST.json)")
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
  app.add_option("--store-format", store_format,
                 "1: a store per TP rank (rank<R>of<W>/); 2: a TP-free store that ranks of any TP "
                 "size up to the model's KV heads share (kvtier2/, docs/format.md); needs --model")
      ->transform(whole_number(1, 2));
  app.add_option("--max-tp", max_tp,
                 "With --store-format 2: the largest TP size the store serves (a power of two; "
                 "a store made with another is another store)")
      ->transform(whole_number(1, 1024));
  app.add_option("--compress", compress,
                 "With --store-format 2 and 16-bit KV: off, or split16 (each record coded "
                 "losslessly, kept raw where that saves under 1/20; decoded on the host on "
                 "restore). Records of either kind are read whatever this says")
      ->check(CLI::IsMember({"off", "split16"}));
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
  // A comma always separates drives; a directory whose own name has one cannot be named here.
  if (struct stat st{}; !o.extra_roots.empty() && ::lstat(root.c_str(), &st) == 0) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("--store {}: a comma separates drives, and '{}' is itself a path; name "
                            "it through a symbolic link or a path without a comma",
                            root, root));
  }
  o.store_format = store_format;
  o.max_tp = max_tp;
  if (auto c = parse_compression(compress)) o.compression = *c;  // IsMember checked the name
  if (store_format == 2 && !model_given) {
    return fail(ErrorCode::kInvalidArgument,
                "--store-format 2 needs --model: a TP-free store is found by the model's shape");
  }
  Result<std::optional<StoredStore>> stored = std::optional<StoredStore>();
  if (!model_given && store_format == 1) {
    stored = stored_store(o, tp_rank, tp_world);
    if (!stored) return fail(stored.error());
  }
  if (*stored) {
    o.geometry = (*stored)->geometry;
    if (chunk_tokens_given) o.geometry.chunk_tokens = chunk_tokens;  // the engine checks it
  } else {
    auto g = geometry_for(model, tp_rank, tp_world, chunk_tokens);
    if (!g) return fail(g.error());
    o.geometry = *g;
    if (g->kv_tensors == 1 && store_format == 1) {
      return fail(ErrorCode::kInvalidArgument,
                  fmt::format("--model {} is an MLA model: its latent, which every rank holds, is "
                              "kept once by a TP-free store; add --store-format 2",
                              model));
    }
  }
  o.tenant = tenant;
  o.create_if_missing = create;
  // "dram" is the O_DIRECT path with a DRAM tier in front, not a way of reading files.
  if (io == "dram" || io == "direct" || io == "posix") {
    o.io_path = IoPath::kDirect;
  } else {
    auto path = parse_io_path(io);
    if (!path) {
      return fail(
          ErrorCode::kInvalidArgument,
          fmt::format("--io {}: expected auto, posix (or direct), buffered, gds or dram", io));
    }
    o.io_path = *path;
  }
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
  if (auto checked = o.resolved(); !checked) {
    const std::optional<std::string> problem =
        checked.error().code() == ErrorCode::kInvalidArgument ? flag_problem(o) : std::nullopt;
    if (problem) return fail(ErrorCode::kInvalidArgument, *problem);
    return fail(checked.error());
  }
  if (*stored && o.segment_bytes != 0 && o.segment_bytes != (*stored)->segment_bytes) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("--segment-size {}: the store ({}) has {} segments and keeps them; "
                            "leave --segment-size out",
                            size_text(o.segment_bytes), (*stored)->manifest,
                            size_text((*stored)->segment_bytes)));
  }
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
    if (err == EEXIST && ::stat(path.c_str(), &st) != 0) {
      KVTIER_TRY(check_link(path, errno));
    }
    if (err != EEXIST || ::stat(path.c_str(), &st) != 0)
      return posix_error(err, "creating directory " + path.string());
    if (!S_ISDIR(st.st_mode))
      return {ErrorCode::kInvalidArgument, fmt::format("not a directory: {}", path.string())};
  }
  return {};
}

Status make_store_dirs(const std::string& dirs) {
  std::stringstream list(dirs);
  for (std::string dir; std::getline(list, dir, ',');) KVTIER_TRY(make_dirs(dir));
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
    KVTIER_TRY(check_link(p, errno));
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
