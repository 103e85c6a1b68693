// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Launchers of the KV kernels (kernels.cu). Plain C++ interface: no CUDA headers needed to call
// them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/kv_layout.hpp"

namespace kvtier::cuda {

using Stream = void*;  // cudaStream_t

/// Payload bytes of one span, already in device memory at `src`.
struct ScatterJob {
  const uint8_t* src;
  PieceSpan span;
};

/// Copies each job's payload bytes into the target and adds their kvsum terms to
/// sums[span.record] (unless `checksum` is false: benchmarks only). Up to 32 jobs per launch.
/// Requires 16-byte multiples (rows and heads of 16-byte multiples). Returns a cudaError_t.
int launch_scatter(const ScatterJob* jobs, size_t count, const KvLayoutParams& p,
                   unsigned long long* sums, Stream stream, bool checksum = true);

/// The reverse: copies a span's payload bytes from the target into device staging `dst`.
int launch_gather(uint8_t* dst, const PieceSpan& span, const KvLayoutParams& p, Stream stream);

/// Adds the kvsum terms of a whole record's payload (read from the target) to *sum.
int launch_record_sum(uint64_t first_token, uint32_t token_count, const KvLayoutParams& p,
                      unsigned long long* sum, Stream stream);

}  // namespace kvtier::cuda
