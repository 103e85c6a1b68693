// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Whether the GPU tests have a CUDA device to run on (each skips itself without one).
#pragma once

#include <cuda_runtime.h>

namespace kvtier::testing {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace kvtier::testing
