// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Which KV the seed benchmark's prefill stand-in writes (`kvtier bench --kv`): synthetic words
// (random, or bf16-like), or forward-pass KV from a file that bench/codec/forward_kv.py wrote,
// tiled over the model and the session as kv_file_rows.hpp says.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "kv_file_rows.hpp"
#include "kvtier/kvtier.hpp"

namespace kvtier::seed {

/// A KV file as its sidecar `<file>.json` describes it: kvtier's contiguous form
/// [2, layers, tokens, heads, head_dim] of little-endian bf16.
struct KvFileInfo {
  std::string path;
  KvFileDims dims;
  std::string model;  ///< the sidecar's sentence on what made the KV (e.g. its random weights)
};

/// A KV file's bytes, read whole (once per rank process, shared by its caches).
struct KvFile {
  KvFileInfo info;
  std::vector<std::byte> bytes;
};

struct KvSource {
  enum class Kind { kRandom, kBf16Like, kFile };
  Kind kind = Kind::kRandom;
  std::shared_ptr<const KvFile> file;  ///< kFile only
};

/// `--kv`'s check: random, bf16-like or file:PATH with a PATH.
[[nodiscard]] CLI::Validator kv_flag_validator();

/// PATH of `--kv file:PATH`; nullopt for the synthetic kinds.
[[nodiscard]] std::optional<std::string> kv_file_path(std::string_view kv);

/// Reads the sidecar `<path>.json` and checks the file against it (there, readable, as many bytes
/// as its shape of bf16 makes) without reading the KV itself. kInvalidArgument, naming the file
/// and what is wrong, otherwise.
[[nodiscard]] Result<KvFileInfo> probe_kv_file(const std::string& path);

/// Whether a rank of geometry `g` can be tiled from the file: K and V (not an MLA latent) of
/// 2-byte elements and the file's head_dim. kInvalidArgument otherwise.
[[nodiscard]] Status kv_file_fits(const KvFileInfo& file, const KvGeometry& g);

/// `--kv` checked before a run of `model` at TP `world` makes anything: for file:PATH the file
/// probed (not read) and fitted to the model; nullopt for the synthetic kinds.
[[nodiscard]] Result<std::optional<KvFileInfo>> check_kv_flag(std::string_view kv,
                                                              const std::string& model,
                                                              uint32_t world);

/// `--kv` as a source; for file:PATH the file probed and read whole.
[[nodiscard]] Result<KvSource> load_kv_source(std::string_view kv);

/// What seed.json's workload.kv and the table say of the KV; `file` for file:PATH.
[[nodiscard]] std::string describe_kv(std::string_view kv, const KvFileInfo* file);

}  // namespace kvtier::seed
