// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The CUDA device in a build without CUDA (src/CMakeLists.txt picks this file or cuda_device.cpp).
#include "device/device.hpp"

namespace kvtier {

Result<std::unique_ptr<Device>> make_cuda_device() {
  return fail(ErrorCode::kNotSupported, "kvtier was built without CUDA");
}

}  // namespace kvtier
