// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Builds without CUDA: the seed benchmark runs on the host-emulated device only.
#include "bench_kv.hpp"

namespace kvtier::seed {

Result<std::unique_ptr<BenchKv>> make_cuda_bench_kv(const KvGeometry&, uint64_t, int,
                                                    const KvSource&) {
  return fail(ErrorCode::kNotSupported, "this build of kvtier has no CUDA support");
}

}  // namespace kvtier::seed
