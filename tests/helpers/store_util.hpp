// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A store opened from Options the way the engine opens it, for tests of the store alone.
#pragma once

#include <memory>

#include "kvtier/options.hpp"
#include "store/store.hpp"

namespace kvtier::testing {

/// The store's part of `o` (already resolved), over `fs`.
inline StoreConfig store_config(const Options& o,
                                std::shared_ptr<FileSystem> fs = FileSystem::posix()) {
  return StoreConfig::of(o, std::move(fs));
}

}  // namespace kvtier::testing
