// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The one place that knows whether this build has the CUDA device.
#include "device/device.hpp"
#include "kvtier/build_config.hpp"

namespace kvtier {

#if KVTIER_HAVE_CUDA
Result<std::unique_ptr<Device>> make_cuda_device_impl();
Result<std::unique_ptr<Device>> make_cuda_device() { return make_cuda_device_impl(); }
#else
Result<std::unique_ptr<Device>> make_cuda_device() {
  return fail(ErrorCode::kNotSupported, "kvtier was built without CUDA");
}
#endif

}  // namespace kvtier
