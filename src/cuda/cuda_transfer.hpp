// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// One save or restore against KV in GPU memory (cuda_transfer.cpp), on resources of the GPU's pool.
#pragma once

#include <memory>

#include "cuda/cuda_pool.hpp"
#include "device/device.hpp"

namespace kvtier {

/// kNotSupported when the kernels cannot move KV laid out as `params`.
[[nodiscard]] Status cuda_shape_supported(const KvLayoutParams& params);

/// A transfer over `records` records and `slots` staging slots of `slot_bytes` into or out of
/// `target` (memory of GPU target.device, whose pool `pool` is), ordered after the work queued on
/// the caller's stream. Its slots and scratch go back to `pool`, which must outlive it.
[[nodiscard]] Result<std::unique_ptr<DeviceTransfer>> begin_cuda_transfer(
    CudaPool& pool, const KvMemory& target, size_t records, size_t slots, size_t slot_bytes);

}  // namespace kvtier
