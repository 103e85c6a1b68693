// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The CUDA error domain: the one mapping of a CUDA runtime error to a Status.
#pragma once

#include <string_view>

#include "kvtier/status.hpp"

namespace kvtier {

/// `err` (a cudaError_t, or what a kernel launcher returned) as a Status: ok for cudaSuccess, else
/// kDevice saying `context` and CUDA's name and words for the error, with the code as native error.
[[nodiscard]] Status cuda_status(int err, std::string_view context);

}  // namespace kvtier
