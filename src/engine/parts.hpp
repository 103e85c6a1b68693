// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// What the public Engine does with its parts (engine_facade.cpp, hybrid.cpp): every call on each
// part, in parallel where it moves data, with no exception crossing the public API.
#pragma once

#include <future>
#include <memory>
#include <new>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "api/try.hpp"
#include "engine/engine_impl.hpp"

namespace kvtier {

template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kInternal, "out of host memory");
  } catch (const std::exception& e) {
    return fail(ErrorCode::kInternal, fmt::format("unexpected exception: {}", e.what()));
  }
}

using Parts = std::vector<std::unique_ptr<Engine::Impl>>;

/// op(part) for every part, the first on this thread and the others on threads of their own (on
/// this one where a thread cannot be had); the results in the parts' order.
template <typename Op>
auto each_part(const Parts& parts, Op&& op) {
  using R = decltype(op(*parts[0]));
  auto run = [&](size_t i) { return guarded([&]() -> R { return op(*parts[i]); }); };
  std::vector<std::optional<std::future<R>>> others(parts.size());
  for (size_t i = 1; i < parts.size(); ++i) {
    try {
      others[i] = std::async(std::launch::async, run, i);
    } catch (const std::system_error&) {
      others[i].reset();
    }
  }
  std::vector<R> results;
  results.reserve(parts.size());
  results.push_back(run(0));
  for (size_t i = 1; i < parts.size(); ++i)
    results.push_back(others[i] ? others[i]->get() : run(i));
  return results;
}

/// The caller's memory checked by `part` (each part addresses its own heads of it), then op.
template <typename Kv, typename Op>
auto on_kv_memory(Engine::Impl& part, const Kv& kv, bool restore, Op&& op) {
  using R = decltype(op(part, std::declval<const KvMemory&>()));
  return guarded([&]() -> R {
    KVTIER_ASSIGN_OR_RETURN(KvMemory memory, part.kv_memory_of(kv, restore));
    return op(part, memory);
  });
}

/// Saves `tokens` from `source` into `part`; a follower (another rank writes its group) saves
/// nothing and answers what its writer holds of the session.
template <typename Kv>
Result<SaveResult> save_part(Engine::Impl& part, std::span<const Token> tokens, const Kv& source) {
  return on_kv_memory(part, source, /*restore=*/false,
                      [&](Engine::Impl& p, const KvMemory& t) -> Result<SaveResult> {
                        if (p.part_.follower) {
                          p.follow_writer();
                          // What its writer had stored when asked.
                          return SaveResult{.tokens_stored = p.local_prefix(tokens)};
                        }
                        return p.save(tokens, t);
                      });
}

/// A save's parts combined: the session is stored as far as every part stored it. Parts that do
/// not write (read-only) are left out by the caller.
Result<SaveResult> combine(std::vector<Result<SaveResult>> results);
/// A restore's parts combined: the prefix every part restored.
Result<RestoreResult> combine(std::vector<Result<RestoreResult>> results);

}  // namespace kvtier
