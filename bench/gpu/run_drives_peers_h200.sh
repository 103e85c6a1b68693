#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The third fast-drive run (docs/perf.md "fast drives"), on RAM-backed loop devices standing in for
# NVMe (fast_drives.sh), in one call:
#   1. kvtier over 4 and 2 drives with one request in flight per drive and rank (4 MiB and 16 MiB),
#      posix and cuFile (compat), fio's aggregate ceiling next to each;
#   2. the peers (LMCache disk and GDS backends, KvikIO, a naive loader) against kvtier at the
#      device's best pattern (4 MiB requests, one in flight per rank), fio's ceiling in the same run,
#      on one drive large enough for every configuration's files;
#   3. one drive at 4 MiB x 1 and at the defaults: the CPU per GB with blocking-sync waits.
# Each step is skipped once the call's time is nearly spent, so what ran always comes back.
# Results: $OUT/summary.txt and $OUT/runs.tar.gz. Env: OUT, SESSIONS (1), BUDGET_S (540).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
h200_python_env
h200_build || exit 1
h200_results drive-results
say "LABEL: $FAST_DRIVE_LABEL"

# 1. Several drives, one request in flight per drive and rank.
drop_fast_drives 2>/dev/null
make_fast_drives 4 22 | tee -a "$OUT/summary.txt" || exit 1
four=/mnt/fast0/m,/mnt/fast1/m,/mnt/fast2/m,/mnt/fast3/m
h200_seed four-4M-x1 $four --paths posix,gds --request-size 4M --staging 16M
rm -rf /mnt/fast*/m
h200_seed four-16M-x1 $four --paths posix --request-size 16M --staging 64M
rm -rf /mnt/fast*/m
h200_seed two-4M-x1 /mnt/fast0/m,/mnt/fast1/m --paths posix,gds --request-size 4M --staging 8M
drop_fast_drives
# 2. The peers on one drive holding kvtier's store, the plain files and LMCache's two backends' files.
make_fast_drives 1 46 | tee -a "$OUT/summary.txt" || exit 1
start=$(date +%s)
timeout $(( ${BUDGET_S:-540} - 110 - ($(date +%s) - H200_T0) )) python3 bench/peers/peers_bench.py --dir /mnt/fast0/peers \
  --out "$OUT/peers" --repeats 2 --request-size 4M --staging 4M \
  --configs "kvtier posix,kvikio compat,kvikio cufile,naive torch,lmcache disk,lmcache gds" \
  > "$OUT/peers.txt" 2>&1
say "== peers (one drive, kvtier at 4M x 1): rc $? in $(( $(date +%s) - start )) s"
grep -vE "^W1203|Warning" "$OUT/peers/table.md" 2>/dev/null | tee -a "$OUT/summary.txt"
rm -rf /mnt/fast0/peers

# 3. One drive: CPU per GB with blocking-sync waits, at 4 MiB x 1 and at the defaults.
h200_seed one-4M-x1 /mnt/fast0/s --paths posix --request-size 4M --staging 4M
rm -rf /mnt/fast0/s
h200_seed one-default /mnt/fast0/s --paths posix
drop_fast_drives
say "total: $(( $(date +%s) - H200_T0 )) s"
