// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The stores an Engine keeps for one rank: its own (format 1), or one per head group it holds in
// a TP-free store (format 2, docs/format.md "TP-free stores"), and their Stats as one.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/engine_impl.hpp"

namespace kvtier {

/// Opens the parts of `options`' rank: kInvalidArgument for a TP size a TP-free store cannot
/// serve, saying why; the errors of Engine::open otherwise.
[[nodiscard]] Result<std::vector<std::unique_ptr<Engine::Impl>>> open_store_parts(
    const Options& options);

/// A store per rank (format 1) of `options`' rank beside its TP-free store, opened read-only so
/// that its sessions are still served (docs/format.md "Format-1 stores beside a TP-free store"):
/// null when there is none, or for a model format 1 cannot hold; one that cannot be opened is
/// said in the log and left alone, never failing the open.
[[nodiscard]] std::unique_ptr<Engine::Impl> open_format1_beside(const Options& options);

/// The parts' Stats as one engine's: counts of records, bytes and store contents summed; counts of
/// calls (every call goes to every part) and latencies taken from the first part; sizes and drive
/// counts (every part has the same drives) their largest; texts the first non-empty.
[[nodiscard]] Stats combine_part_stats(std::span<const Stats> parts);

}  // namespace kvtier
