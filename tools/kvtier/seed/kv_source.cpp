// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "kv_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/try.hpp"
#include "common/posix.hpp"

namespace kvtier::seed {
namespace {

constexpr std::string_view kFilePrefix = "file:";

// Every problem with the file is bad input (exit 2), whatever errno said: the run is refused
// before it saves anything, as for any other bad flag.
Status bad_file(const std::string& path, std::string_view what, int native_error = 0) {
  return {ErrorCode::kInvalidArgument, fmt::format("--kv file:{}: {}", path, what), native_error};
}

// A dimension of the sidecar's shape: a whole number in 1..2^31-1 (token ids and head counts are
// 32-bit; the product is checked apart).
std::optional<uint64_t> dimension(const nlohmann::json& v) {
  if (!v.is_number_unsigned()) return std::nullopt;
  const uint64_t d = v.get<uint64_t>();
  if (d == 0 || d > uint64_t{std::numeric_limits<int32_t>::max()}) return std::nullopt;
  return d;
}

Result<KvFileInfo> read_sidecar(const std::string& path) {
  const std::string json_path = path + ".json";
  auto text = read_file(json_path);
  if (!text) {
    return fail(bad_file(path,
                         fmt::format("its sidecar {} cannot be read (bench/codec/forward_kv.py "
                                     "writes one beside the KV: shape, dtype, model)",
                                     json_path),
                         text.error().native_error()));
  }
  const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    return fail(bad_file(path, fmt::format("{} is not a JSON object", json_path)));
  const auto shape = j.value("shape", nlohmann::json());
  std::vector<uint64_t> dims;
  for (const auto& v : shape.is_array() ? shape : nlohmann::json::array()) {
    if (auto d = dimension(v)) dims.push_back(*d);
  }
  if (dims.size() != 5 || shape.size() != 5 || dims[0] != 2) {
    return fail(
        bad_file(path, fmt::format("{}'s shape {} is not [2, layers, tokens, kv_heads, head_dim]",
                                   json_path, shape.dump())));
  }
  if (j.value("dtype", "") != "bfloat16") {
    return fail(bad_file(path, fmt::format("{}'s dtype {} is not \"bfloat16\"", json_path,
                                           j.value("dtype", nlohmann::json()).dump())));
  }
  const std::string model = j.value("model", "");
  if (model.empty()) {
    return fail(
        bad_file(path, fmt::format("{} has no \"model\" saying what made the KV", json_path)));
  }
  if (j.contains("tokens") && j["tokens"] != dims[2]) {
    return fail(bad_file(path, fmt::format("{}'s tokens {} is not its shape's {}", json_path,
                                           j["tokens"].dump(), dims[2])));
  }
  return KvFileInfo{path,
                    {static_cast<uint32_t>(dims[1]), dims[2], static_cast<uint32_t>(dims[3]),
                     static_cast<uint32_t>(dims[4])},
                    model};
}

// Bytes of the file's shape; nullopt past 2^64.
std::optional<uint64_t> shape_bytes(const KvFileDims& d) {
  uint64_t bytes = 2 * 2;  // K and V, 2-byte elements
  for (uint64_t n : {uint64_t{d.layers}, d.tokens, uint64_t{d.heads}, uint64_t{d.head_dim}}) {
    if (__builtin_mul_overflow(bytes, n, &bytes)) return std::nullopt;
  }
  return bytes;
}

std::string shape_text(const KvFileDims& d) {
  return fmt::format("[2, {}, {}, {}, {}]", d.layers, d.tokens, d.heads, d.head_dim);
}

struct OpenKvFile {
  UniqueFd fd;
  KvFileInfo info;
  uint64_t bytes = 0;
};

// The file opened and checked against its sidecar: a regular file of the shape's size.
Result<OpenKvFile> open_kv_file(const std::string& path) {
  auto fd = open_file(path, O_RDONLY);
  if (!fd) return fail(bad_file(path, "cannot be read", fd.error().native_error()));
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode))
    return fail(bad_file(path, "is not a regular file"));
  KVTIER_ASSIGN_OR_RETURN(KvFileInfo info, read_sidecar(path));
  const auto want = shape_bytes(info.dims);
  if (!want || *want != static_cast<uint64_t>(st.st_size)) {
    return fail(
        bad_file(path, fmt::format("is {} bytes; the shape {} of bfloat16 in {}.json "
                                   "makes {}",
                                   st.st_size, shape_text(info.dims), path,
                                   want ? fmt::format("{} bytes", *want) : "over 2^64 bytes")));
  }
  return OpenKvFile{std::move(*fd), std::move(info), *want};
}

}  // namespace

CLI::Validator kv_flag_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text == "random" || text == "bf16-like") return {};
        if (text.starts_with(kFilePrefix) && text.size() > kFilePrefix.size()) return {};
        return fmt::format("'{}' is not random, bf16-like or file:PATH", text);
      },
      "random|bf16-like|file:PATH");
}

std::optional<std::string> kv_file_path(std::string_view kv) {
  if (!kv.starts_with(kFilePrefix)) return std::nullopt;
  return std::string(kv.substr(kFilePrefix.size()));
}

Result<KvFileInfo> probe_kv_file(const std::string& path) {
  KVTIER_ASSIGN_OR_RETURN(OpenKvFile file, open_kv_file(path));
  return std::move(file.info);
}

Status kv_file_fits(const KvFileInfo& file, const KvGeometry& g) {
  if (g.kv_tensors != 2) {
    return bad_file(file.path, fmt::format("{} keeps one latent per token and layer (MLA), not K "
                                           "and V: file KV tiles K and V only",
                                           g.model_id));
  }
  if (g.element_bytes != 2) {
    return bad_file(file.path,
                    fmt::format("{}'s KV has {}-byte elements; the file's bfloat16 has 2",
                                g.model_id, g.element_bytes));
  }
  if (g.head_dim != file.dims.head_dim) {
    return bad_file(file.path,
                    fmt::format("its heads are {} elements (shape {}); {}'s head_dim is {}",
                                file.dims.head_dim, shape_text(file.dims), g.model_id, g.head_dim));
  }
  return {};
}

Result<std::optional<KvFileInfo>> check_kv_flag(std::string_view kv, const std::string& model,
                                                uint32_t world) {
  const auto path = kv_file_path(kv);
  if (!path) return std::nullopt;
  KVTIER_ASSIGN_OR_RETURN(KvFileInfo info, probe_kv_file(*path));
  // Head size and element size are the same at every TP size and chunk size.
  KVTIER_ASSIGN_OR_RETURN(KvGeometry g, geometry_for(model, 0, world));
  KVTIER_TRY(kv_file_fits(info, g));
  return info;
}

Result<KvSource> load_kv_source(std::string_view kv) {
  if (kv == "random") return KvSource{};
  if (kv == "bf16-like") return KvSource{KvSource::Kind::kBf16Like, nullptr};
  const auto path = kv_file_path(kv);
  if (!path || path->empty()) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("--kv '{}': expected random, bf16-like or file:PATH", kv));
  }
  KVTIER_ASSIGN_OR_RETURN(OpenKvFile open, open_kv_file(*path));
  auto file = std::make_shared<KvFile>();
  file->info = std::move(open.info);
  file->bytes.resize(open.bytes);
  if (Status st = pread_full(open.fd.get(), file->bytes, 0); !st.ok())
    return fail(bad_file(*path, st.message(), st.native_error()));
  return KvSource{KvSource::Kind::kFile, std::move(file)};
}

std::string describe_kv(std::string_view kv, const KvFileInfo* file) {
  if (kv == "bf16-like")
    return "synthetic, bf16-like (each 16-bit word one of four exponents; not a model's KV)";
  if (file == nullptr) return "synthetic, random words (incompressible)";
  const KvFileDims& d = file->dims;
  return fmt::format(
      "forward-pass KV from {} ({}; shape {}), tiled: K or V of model layer l, model head h at "
      "position t is the file's layer l % {}, head h % {}, token (t % {} + offset) % {}, the "
      "offset a hash of the token id at the window's first position t - t % {}, of t / {}, of "
      "l / {} and of h / {} (tools/kvtier/seed/kv_file_rows.hpp)",
      file->path, file->model, shape_text(d), d.layers, d.heads, d.tokens, d.tokens, d.tokens,
      d.tokens, d.layers, d.heads);
}

}  // namespace kvtier::seed
