// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the store builds from the FileSystem's calls: whole-file reads, atomic replacement.
#include "common/file_system.hpp"

#include <fcntl.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier {

Status File::read_at(std::span<std::byte> buf, uint64_t offset) {
  KVTIER_ASSIGN_OR_RETURN(size_t n, read(buf, offset));
  if (n == buf.size()) return {};
  return {ErrorCode::kCorrupt,
          fmt::format("short read of {}: end of file at {} (wanted {} more bytes)", path_,
                      offset + n, buf.size() - n)};
}

Result<std::string> read_file(FileSystem& fs, const std::string& path) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.open(path, O_RDONLY));
  // To the end of the file rather than to the size stat said: a writer may append meanwhile (a
  // read-only open reads the index beside one).
  std::string text;
  constexpr size_t kChunk = 256 * 1024;
  for (;;) {
    const size_t at = text.size();
    text.resize(at + kChunk);
    KVTIER_ASSIGN_OR_RETURN(size_t n,
                            file->read(std::as_writable_bytes(std::span(text)).subspan(at), at));
    text.resize(at + n);
    if (n < kChunk) return text;
  }
}

Status write_file_atomic(FileSystem& fs, const std::string& dir, const std::string& name,
                         std::span<const std::byte> bytes, const std::string& tmp_name) {
  const std::string tmp =
      tmp_name.empty() ? fmt::format("{}/{}.tmp", dir, name) : fmt::format("{}/{}", dir, tmp_name);
  {
    KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.open(tmp, O_WRONLY | O_CREAT | O_TRUNC));
    KVTIER_TRY(file->write_at(bytes, 0));
    KVTIER_TRY(file->sync());
  }
  KVTIER_TRY(fs.rename(tmp, fmt::format("{}/{}", dir, name)));
  return fs.sync_dir(dir);
}

Result<bool> exists(FileSystem& fs, const std::string& path) {
  auto info = fs.stat(path);
  if (info) return true;
  if (info.error().native_error() == ENOENT) return false;
  return fail(info.error());
}

Status make_dir_durable(FileSystem& fs, const std::string& path) {
  Status made = fs.make_dir(path);
  if (made.ok()) {
    std::string parent = std::filesystem::path(path).parent_path().string();
    return fs.sync_dir(parent.empty() ? "." : parent);
  }
  if (made.native_error() != EEXIST) return made;
  KVTIER_ASSIGN_OR_RETURN(FileInfo info, fs.stat(path));
  if (!info.directory) {
    return {ErrorCode::kInvalidArgument, fmt::format("{} exists and is not a directory", path)};
  }
  return {};
}

Status make_dirs_durable(FileSystem& fs, const std::string& path, uint32_t parents) {
  std::vector<std::filesystem::path> chain{path};
  for (uint32_t i = 0; i < parents; ++i) chain.push_back(chain.back().parent_path());
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (it->empty()) continue;
    KVTIER_TRY(make_dir_durable(fs, it->string()));
  }
  return {};
}

}  // namespace kvtier
