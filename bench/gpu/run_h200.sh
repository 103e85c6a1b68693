#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# One batch on the H200 machine: build with CUDA, run every test (GPU tests included), then the
# GPU path benchmark. Debian packages the machine lacks travel as .deb files in .deps/ (see
# docs/perf.md) and are unpacked under /tmp/deps. Results go to $OUT.
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
  g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
  nproc; free -g | head -2; df -h / | tail -1; uname -r
  ls -l /usr/local/cuda/include/cufile.h /usr/local/cuda/lib64/libcufile.so* 2>&1 | head -5
  ls /proc/driver/nvidia-fs 2>&1 | head -2
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
h200_build || exit 1
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "== tests (no udev entry: GDS must fall back and say why)"
  h200_tests
fi
echo "== GDS with the test machine's udev entry: cuFile registers files, compat mode"
h200_udev_entry
if [ -z "${SKIP_TESTS:-}" ]; then h200_gds_tests; fi
export KVTIER_BENCH_GDS=1
echo "== GPU path benchmark"
mkdir -p /root/kvbench && rm -rf /root/kvbench/* /root/kvbench-dram
stdbuf -oL build/h200/bench/kvtier_gpu_bench /root/kvbench "$OUT/gpu_bench.json" "${TOKENS:-100000}" "${REPEATS:-3}" 2>&1 | tee "$OUT/gpu_bench.txt"
echo "== dd ceiling: O_DIRECT 16 MiB reads of both ranks' segment files at once (one dd per rank)"
sync; echo 3 > /proc/sys/vm/drop_caches
start=$(date +%s.%N)
for r in /root/kvbench/rank*; do
  (for f in "$r"/seg-*.kvt; do dd if="$f" of=/dev/null bs=16M iflag=direct status=none; done) &
done
wait
end=$(date +%s.%N)
bytes=$(du -cb /root/kvbench/rank*/seg-*.kvt | tail -1 | cut -f1)
python3 -c "print(f'dd O_DIRECT: {$bytes/1e9:.2f} GB in {$end-$start:.2f} s = {$bytes/1e9/($end-$start):.2f} GB/s')" | tee -a "$OUT/gpu_bench.txt"
rm -rf /root/kvbench /root/kvbench-dram
