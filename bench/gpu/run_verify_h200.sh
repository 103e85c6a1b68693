#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# One call that checks a change end to end on the H200 machine: build with CUDA and the remote tier
# (hiredis and redis from .deps: bench/gpu/fetch_debs.sh), every test (GPU and redis-labelled ones
# included) without cuFile's udev entry, the GPU tests with it, the seed workload on the virtio disk
# (posix, gds, dram; one 100K-token session, against the earlier seed runs: nothing may regress),
# then the shared workload into GPU memory (run_shared_h200.sh, one session).
# Results: $OUT/summary.txt and $OUT/runs.tar.gz. Env: OUT, BUDGET_S (540).
set -uo pipefail
here=$(dirname "$0")
source "$here/h200_common.sh"
if [ -f build/h200/CMakeCache.txt ] && ! grep -q "^HIREDIS_FOUND:INTERNAL=1" build/h200/CMakeCache.txt; then
  rm -f build/h200/build.ninja
fi
KVTIER_WITH_REDIS=ON h200_build || exit 1
h200_results verify-results
h200_tests 2>&1 | tee -a "$OUT/summary.txt"
h200_udev_entry
h200_gds_tests 2>&1 | tee -a "$OUT/summary.txt"
h200_seed virtio /root/seed-virtio --paths posix,gds,dram
rm -rf /root/seed-virtio
if h200_left 90; then
  SKIP_TESTS=1 SHARED_ARGS="${SHARED_ARGS:---sessions 1 --repeat 3}" bash "$here/run_shared_h200.sh" 2>&1 \
    | tail -30 | tee -a "$OUT/summary.txt"
else
  say "== shared: skipped (time)"
fi
say "total: $(( $(date +%s) - H200_T0 )) s"
