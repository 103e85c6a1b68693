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
  StoreConfig c;
  c.roots.push_back(o.root);
  c.roots.insert(c.roots.end(), o.extra_roots.begin(), o.extra_roots.end());
  c.geometry = o.geometry;
  c.capacity_bytes = o.capacity_bytes;
  c.segment_bytes = o.segment_bytes;
  c.create_if_missing = o.create_if_missing;
  c.read_only = o.read_only;
  c.try_direct_io = o.io_path != IoPath::kBuffered;
  c.fs = std::move(fs);
  return c;
}

}  // namespace kvtier::testing
