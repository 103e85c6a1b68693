// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Engine::read_extents: what a restore reads, as file ranges an independent tool can read too.
#include "engine/engine_impl.hpp"

namespace kvtier {

Result<std::vector<FileExtent>> Engine::Impl::read_extents(std::span<const Token> tokens) {
  const std::vector<LocatedRecord> records =
      tokens.empty() ? store_->all_records() : find_prefix(tokens);
  std::vector<FileExtent> extents;
  for (const LocatedRecord& r : records) {
    const uint64_t bytes = r.meta.record_bytes();
    if (!extents.empty() && extents.back().path == r.file->path &&
        extents.back().offset + extents.back().length == r.meta.offset) {
      extents.back().length += bytes;
    } else {
      extents.push_back(FileExtent{r.file->path, r.meta.offset, bytes});
    }
  }
  return extents;
}

}  // namespace kvtier
