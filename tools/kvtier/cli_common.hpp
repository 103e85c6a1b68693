// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Pieces shared by the kvtier CLI's commands. The CLI uses only the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "kvtier/kvtier.hpp"

namespace kvtier::cli {

/// Token ids and counts are 32-bit (`Token` is int32_t): no session holds more tokens than this.
inline constexpr uint64_t kMaxTokens = INT32_MAX;
/// Counts of sessions and repeats: a session's seed + its index then never wraps (see kMaxSeed).
inline constexpr uint64_t kMaxCount = INT32_MAX;
/// Seeds: session i uses seed + i, which stays below 2^64 for any count up to kMaxCount.
inline constexpr uint64_t kMaxSeed = INT64_MAX;

/// Transform for a whole-number option: accepts plain decimal digits with a value in [lo, hi] and
/// hands CLI11 the value in canonical form. Needed because CLI11 alone reads "-1" into an unsigned
/// option as 2^64-1 (strtoull wraps it), "99999999999999999999" as 2^64-1, and "010" as octal 8.
[[nodiscard]] CLI::Validator whole_number(uint64_t lo, uint64_t hi);

/// The store flags a command takes beyond --store, --model, --tp-rank, --tp-world and
/// --chunk-tokens (which every command needs to find its store). A flag that cannot change what a
/// command does is not offered, so that e.g. `ls --capacity 1M` is refused rather than ignored (or
/// worse: a smaller capacity makes the store evict at open).
struct FlagGroups {
  bool tenant = true;     ///< --tenant: which keys a command looks up or writes
  bool layout = true;     ///< --capacity, --segment-size: a new store's size and segments
  bool io_path = true;    ///< --io
  bool io_tuning = true;  ///< --request-size, --staging
  bool dram = true;       ///< --dram
  bool remote = false;    ///< --remote, --remote-password-env, --remote-password-file, --remote-ttl
};

/// Flags that say which store and geometry a command works on.
struct StoreFlags {
  std::string root = "./kvtier-store";
  std::string model = "qwen3-coder-30b-a3b";
  uint32_t tp_rank = 0;
  uint32_t tp_world = 1;
  uint32_t chunk_tokens = 256;
  uint32_t store_format = 1;     ///< Options::store_format
  uint32_t max_tp = 8;           ///< Options::max_tp
  std::string compress = "off";  ///< Options::compression
  std::string tenant;
  std::string capacity = "0";
  std::string segment = "0";
  std::string io = "auto";
  std::string request = "0";
  std::string staging = "0";
  std::string dram = "0";
  std::string remote;
  std::string remote_password_env;
  std::string remote_password_file;
  uint64_t remote_ttl = 0;
  /// Whether --model and --chunk-tokens were given. Without --model, a store that exists is opened
  /// with the geometry its MANIFEST.json records (docs/format.md), --chunk-tokens still checked.
  bool model_given = true;
  bool chunk_tokens_given = true;

  void add_to(CLI::App& app, const FlagGroups& groups = {});
  /// Options for the engine; kInvalidArgument for nonsense values.
  [[nodiscard]] Result<Options> options(bool create) const;
};

/// Refuses (kNoSpace: exit 4) to allocate `bytes` of host memory for `what` when they exceed
/// MemAvailable in /proc/meminfo; ok where that cannot be read.
[[nodiscard]] Status check_host_memory(uint64_t bytes, std::string_view what);

/// Creates `dir` and every missing directory above it, each 0700 (a store holds user data), so
/// that `--store a/b/c` works without a separate mkdir. kInvalidArgument "not a directory: <path>"
/// where a component is a file.
[[nodiscard]] Status make_dirs(const std::string& dir);
/// make_dirs() of each directory of a comma-separated list (a store over several drives).
[[nodiscard]] Status make_store_dirs(const std::string& dirs);

/// For commands that read an existing store: kInvalidArgument "not a directory: <path>" when
/// `root` (or a directory above it) is a file, rather than the store's "no store at
/// <root>/rank0of1", which sends the user looking for a missing store.
[[nodiscard]] Status check_store_root(const std::string& root);

/// Exit code of a failed Status: 2 caller error, 3 store state, 4 OS or I/O, 70 internal.
int exit_code(const Status& status);

/// Prints "kvtier: <what>: <status>" to stderr and returns the exit code.
int report(const Status& status, std::string_view what);

/// "1.23 GB" (decimal units, as drive vendors and the reference quote them).
std::string human_bytes(double bytes);

/// A progress line on stderr, redrawn in place; silent when stderr is not a terminal unless forced.
class Progress {
 public:
  explicit Progress(std::string label);
  void update(uint64_t done, uint64_t total);
  void finish();

 private:
  std::string label_;
  bool tty_;
  int last_percent_ = -1;
};

/// What a put did that its remote summary needs.
struct RemotePut {
  bool wait = false;  ///< --remote-wait
  uint64_t records_saved = 0;
  uint64_t tokens = 0, seed = 0, sessions = 0;
};

int run_put(const StoreFlags& flags, uint64_t tokens, uint64_t seed, uint64_t sessions,
            bool remote_wait);
int run_get(const StoreFlags& flags, uint64_t tokens, uint64_t seed, uint64_t sessions);
int run_ls(const StoreFlags& flags);
/// What `stat` prints: a table, JSON, or the Prometheus text exposition (docs/metrics.md).
enum class StatFormat : uint8_t { kText, kJson, kPrometheus };

int run_stat(const StoreFlags& flags, StatFormat format);
int run_verify(const StoreFlags& flags);
/// Probes every drive's read pattern and keeps it (Engine::tune).
int run_tune(const StoreFlags& flags);
/// put with --remote, after its saves: waits for the write-behind queue and says what reached
/// the cluster; with --remote-wait publishes what it lacks. The exit code: 1 when asked to wait and
/// records were not published.
int finish_remote_put(Engine& engine, const RemotePut& put);
/// Publishes the local records the cluster lacks (Engine::sync_remote) and says what it did.
int run_sync(const StoreFlags& flags);

}  // namespace kvtier::cli
