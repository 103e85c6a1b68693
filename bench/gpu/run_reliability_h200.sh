#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The data-loss checks on the H200 (docs/reliability.md, "GPU paths"): build with CUDA; with
# cuFile's udev entry (compat mode): the stream-race reproduction, the wide slice of the GPU
# property test, the GPU tests, the PyTorch tests (the reported geometries); last the GPU tests
# without the entry (GDS must fall back and say why). Most telling first: a run cut short by the
# device's time limit keeps what matters. Everything lands in $OUT. Needs .deps/ (bench/gpu/fetch_debs.sh)
# and .whl/ with nanobind (same script).
# Env: PROPERTY_CASES (default 500), PROPERTY_MAX_MB (default 64), KVTIER_TEST_SEED (default: the clock).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
h200_build || exit 1
export KVTIER_TEST_SEED="${KVTIER_TEST_SEED:-$(date +%s)}"
echo "seed: $KVTIER_TEST_SEED" | tee "$OUT/seed.txt"

h200_udev_entry
if [ -z "${SKIP_REPRO:-}" ]; then
  echo "== the cause, reproduced: kvtier ordered after an idle stream (the old behaviour) vs the caller's"
  PYTHONPATH="build/h200/python:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 timeout 100 \
    python3 bench/gpu/stream_race_repro.py /root/repro --trials "${REPRO_TRIALS:-2}" --json "$OUT/stream_race.json" \
    > "$OUT/stream_race.log" 2>&1
  python3 - "$OUT/stream_race.log" <<'EOF'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for r in rows:
    if "error" in r: print("error:", r)
rows = [r for r in rows if "error" not in r]
agg = collections.defaultdict(lambda: [0, 0, 0, 0])
for r in rows:
    a = agg[(r["case"], r["io"], r["ordering"])]
    a[0] += 1; a[1] += r["dropped"]; a[2] += r["restored"] == r["tokens"]; a[3] += r["restored_bytes_exact"]
for (case, io, order), (n, dropped, whole, exact) in sorted(agg.items()):
    print(f"{case:7} {io:9} {order:26} trials {n}  records dropped {dropped:4}  whole restores {whole}/{n}  restored bytes exact {exact}/{n}")
EOF
fi

echo "== GPU tests with the udev entry (cuFile compat mode)"
start=$(date +%s)
KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=used timeout 120 build/h200/tests/kvtier_gpu_tests \
  --gtest_filter=-GpuPropertyTest.* > "$OUT/gpu_tests_gds.log" 2>&1
grep -E "gds:|FAILED|PASSED|Failure" -A3 "$OUT/gpu_tests_gds.log" | tail -12
echo "gpu tests (gds): $(( $(date +%s) - start )) s"

echo "== wide property slice: ${PROPERTY_CASES:-500} cases up to ${PROPERTY_MAX_MB:-64} MiB, every path incl. cuFile"
start=$(date +%s)
KVTIER_TEST_DIR=/root KVTIER_PROPERTY_CASES="${PROPERTY_CASES:-500}" KVTIER_PROPERTY_MAX_MB="${PROPERTY_MAX_MB:-64}" \
  timeout 220 build/h200/tests/kvtier_gpu_tests --gtest_filter=GpuPropertyTest.* > "$OUT/property_wide.log" 2>&1
echo "rc $?"
grep -E "KVTIER_TEST_SEED|cases run|FAILED|PASSED|Failure|replay" "$OUT/property_wide.log" | head -20
echo "property: $(( $(date +%s) - start )) s"

echo "== PyTorch on the GPU (the reported geometries), cuFile compat mode"
start=$(date +%s)
PYTHONPATH="build/h200/python:${PYTHONPATH:-}" KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=used \
  timeout 120 python3 tests/python/test_torch.py -v > "$OUT/torch.log" 2>&1
tail -6 "$OUT/torch.log"
echo "torch: $(( $(date +%s) - start )) s"

rm -f "/run/udev/data/b$(mountpoint -d /)"
echo "== GPU tests, no udev entry (cuFile refuses the files: GDS falls back and says why)"
start=$(date +%s)
KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=fallback timeout 150 ctest --test-dir build/h200 -L gpu -LE python \
  --output-on-failure > "$OUT/ctest_gpu.log" 2>&1
grep -E "tests passed|Failed|\(Failed\)|\*\*\*" "$OUT/ctest_gpu.log" | tail -12
echo "gpu tests: $(( $(date +%s) - start )) s"

# The device returns at most 8 files: every log in one archive.
tar -C "$OUT" -czf "$OUT/logs.tar.gz" --exclude=logs.tar.gz --exclude=console.txt . 2>/dev/null
find "$OUT" -maxdepth 1 -type f ! -name logs.tar.gz ! -name console.txt -delete
