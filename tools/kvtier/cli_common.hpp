// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Pieces shared by the kvtier CLI's commands. The CLI uses only the public API.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "kvtier/kvtier.hpp"

namespace kvtier::cli {

/// Flags that say which store and geometry a command works on.
struct StoreFlags {
  std::string root = "./kvtier-store";
  std::string model = "qwen3-coder-30b-a3b";
  uint32_t tp_rank = 0;
  uint32_t tp_world = 1;
  uint32_t chunk_tokens = 256;
  std::string tenant;
  std::string capacity = "0";
  std::string segment = "0";
  std::string io = "auto";
  std::string request = "0";
  std::string staging = "0";
  std::string dram = "0";

  void add_to(CLI::App& app);
  /// Options for the engine; kInvalidArgument for nonsense values.
  [[nodiscard]] Result<Options> options(bool create) const;
};

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

int run_put(const StoreFlags& flags, uint64_t tokens, uint64_t seed, uint64_t sessions);
int run_get(const StoreFlags& flags, uint64_t tokens, uint64_t seed, uint64_t sessions);
int run_ls(const StoreFlags& flags);
int run_stat(const StoreFlags& flags, bool json);
int run_verify(const StoreFlags& flags);

}  // namespace kvtier::cli
