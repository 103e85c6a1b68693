// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Reading a store spread over several drives: one pipeline per drive, all at once, each bounded by
// its own share of the staging.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "datapath/channel.hpp"
#include "io/io_engine.hpp"
#include "io/pipeline.hpp"

namespace kvtier {

/// How many drives `files` are on.
[[nodiscard]] size_t drives_of(std::span<const ChannelFile> files);

/// Reads `pieces` (of `files`) grouped by drive: each group runs its own pipeline, on its
/// own thread and I/O engine, over an equal share of the slots of `lease` (its bound on bytes in
/// flight; with fewer slots than drives, drives share a group). A group's error stops that group
/// only: the others read on, so a failing drive costs only its own records. Returns the first
/// error. The sink sees the pieces' and slots' indices into `pieces` and `lease`, as run_pipeline
/// gives them. `workers` consumer threads are shared among the groups by their slots (rounded up,
/// one at least each).
[[nodiscard]] Status read_across_drives(std::span<const ChannelFile> files,
                                        std::span<const Piece> pieces, StagingPool::Lease& lease,
                                        PieceSink& sink, unsigned workers,
                                        const EngineMaker& make_engine);

}  // namespace kvtier
