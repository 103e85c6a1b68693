// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "cuda/cuda_status.hpp"

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace kvtier {

Status cuda_status(int err, std::string_view context) {
  if (err == cudaSuccess) return {};
  const auto e = static_cast<cudaError_t>(err);
  return Status(ErrorCode::kDevice,
                fmt::format("{}: {} ({})", context, cudaGetErrorString(e), cudaGetErrorName(e)),
                err);
}

}  // namespace kvtier
