// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A store opened from Options the way the engine opens it, for tests of the store alone, and
// edits of a closed store's files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "kvtier/options.hpp"
#include "store/index_log.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

namespace kvtier::testing {

/// The store's part of `o` (already resolved), over `fs`.
inline StoreConfig store_config(const Options& o,
                                std::shared_ptr<FileSystem> fs = FileSystem::posix()) {
  return StoreConfig::of(o, std::move(fs));
}

/// Appends a drop of segment `id` to the journal in `dir`, a closed store's, as its eviction
/// would.
inline void journal_drop(const std::string& dir, uint32_t id) {
  auto journal = IndexLog::open(dir, std::filesystem::file_size(dir + "/index.journal"));
  ASSERT_OK(journal);
  const JournalEntry drop{JournalOp::kDropSegment, {}, id};
  ASSERT_OK(journal->append(std::span(&drop, 1)));
}

/// Flips a bit of the byte at `offset` of `file`.
inline void flip_byte(const std::filesystem::path& file, uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x10));
}

}  // namespace kvtier::testing
