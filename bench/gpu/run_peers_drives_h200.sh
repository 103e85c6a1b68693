#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The fifth fast-drive run (docs/perf.md "fast drives"), in one call: the tests on the GPU (without
# and with cuFile's udev entry), then the peers and kvtier on four RAM-backed loop devices standing
# in for NVMe (fast_drives.sh): kvtier's store over all four, each peer's per-rank files on a drive
# of their own (rank r on drive r, as LMCache's per-GPU disk paths place them), fio's ceilings next
# to each round. Results: $OUT/summary.txt, $OUT/runs.tar.gz. Env: OUT, BUDGET_S (540).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
h200_python_env
h200_build || exit 1
h200_results peers-results
h200_tests 2>&1 | tee -a "$OUT/summary.txt"
h200_udev_entry
h200_gds_tests 2>&1 | tee -a "$OUT/summary.txt"

say "LABEL: $FAST_DRIVE_LABEL"
drop_fast_drives 2>/dev/null
make_fast_drives 4 14 | tee -a "$OUT/summary.txt" || exit 1
start=$(date +%s)
timeout $(( ${BUDGET_S:-540} - 20 - ($(date +%s) - H200_T0) )) python3 bench/peers/peers_bench.py \
  --dir /mnt/fast0/peers --drives /mnt/fast0,/mnt/fast1,/mnt/fast2,/mnt/fast3 --out "$OUT/peers" \
  --repeats 2 --request-size 4M --staging 16M \
  --configs "kvtier posix,kvikio compat,kvikio cufile,naive torch,lmcache disk" > "$OUT/peers.log" 2>&1
say "== peers (4 drives; kvtier's store over all, 4M x 1 per drive and rank): rc $? in $(( $(date +%s) - start )) s"
grep -E '^\{"config"|fio depth|Error|error' "$OUT/peers.log" > "$OUT/peers-rows.txt"
cat "$OUT/peers/table.md" 2>/dev/null | tee -a "$OUT/summary.txt"
drop_fast_drives
say "total: $(( $(date +%s) - H200_T0 )) s"
