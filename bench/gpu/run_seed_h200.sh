#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The seed evaluation on the H200 machine: build with CUDA (reusing build/h200), optionally run the
# tests, give cuFile its udev entry (device-notes.md: a setup step of that test machine, never done
# by kvtier), then `kvtier bench --workload seed $SEED_ARGS`. The run directory comes back as one
# tarball (the device tool returns at most 8 files) plus its table.
# Env: SEED_ARGS (bench flags), RUN_TESTS=1 (ctest first), OUT (results).
set -uo pipefail
OUT="${OUT:-/tmp/kvtier-out}"
mkdir -p "$OUT" /tmp/deps
for f in .deps/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if [ ! -f build/h200/build.ninja ]; then
  cmake -S . -B build/h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DKVTIER_WITH_CUDA=ON -DKVTIER_WITH_IO_URING=ON > "$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; exit 1; }
fi
start=$(date +%s)
cmake --build build/h200 -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -40; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
if [ -n "${RUN_TESTS:-}" ]; then
  start=$(date +%s)
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=fallback ctest --test-dir build/h200 -j 8 --output-on-failure \
    > "$OUT/ctest.log" 2>&1
  grep -E "tests passed|Failed|\(Failed\)|\*\*\*" "$OUT/ctest.log" | tail -15
  echo "tests: $(( $(date +%s) - start )) s"
fi
mm=$(mountpoint -d /)
mkdir -p /run/udev/data
printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > "/run/udev/data/b$mm"
if [ -n "${RUN_TESTS:-}" ]; then
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=used build/h200/tests/kvtier_gpu_tests > "$OUT/gpu_tests.log" 2>&1
  grep -E "gds:|FAILED|PASSED|Failure" -A3 "$OUT/gpu_tests.log" | tail -12
fi
rm -rf /root/seed-store /root/seed-run
start=$(date +%s)
# shellcheck disable=SC2086
stdbuf -oL build/h200/tools/kvtier/kvtier bench --workload seed --store /root/seed-store --out /root/seed-run \
  ${SEED_ARGS:-} 2>&1 | grep -v "%$" | tee "$OUT/seed.txt"
echo "seed: $(( $(date +%s) - start )) s"
tar -C /root -czf "$OUT/seed-run.tar.gz" seed-run
rm -rf /root/seed-store
