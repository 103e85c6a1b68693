#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The fourth fast-drive run (docs/perf.md "fast drives"), on RAM-backed loop devices standing in for
# NVMe (fast_drives.sh), in one call:
#   1. the peers and kvtier on one drive striped over four (device-mapper RAID 0): how a server with
#      several drives is offered to a reader of one file, fio's ceiling on the same files next to
#      each round;
#   2. kvtier's own store over the same four drives (one directory per drive), for comparison;
#   3. one drive at 4 MiB x 1: CPU per GB with io_uring's fixed buffers.
# Results: $OUT/summary.txt and $OUT/runs.tar.gz. Env: OUT, SESSIONS (1), BUDGET_S (540).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
# dmsetup: from the image, or unpacked from a .deb in .deps (dmsetup, libdevmapper1.02.1)
export PATH="/tmp/deps/sbin:$PATH" LD_LIBRARY_PATH="/tmp/deps/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
h200_python_env
h200_build || exit 1
h200_results stripe-results
say "LABEL: $FAST_DRIVE_LABEL"

# 1. The peers on four drives striped into one.
drop_striped_drive 2>/dev/null
drop_fast_drives 2>/dev/null
if make_striped_drive 4 12 2>&1 | tee -a "$OUT/summary.txt"; then
  start=$(date +%s)
  timeout $(( ${BUDGET_S:-540} - 150 - ($(date +%s) - H200_T0) )) python3 bench/peers/peers_bench.py \
    --dir /mnt/stripe/peers --out "$OUT/peers" --repeats 2 --request-size 4M --staging 8M \
    --configs "kvtier posix,kvikio compat,kvikio cufile,naive torch,lmcache disk,lmcache gds" \
    > "$OUT/peers.log" 2>&1
  say "== peers (4 drives striped, kvtier at 4M x 2): rc $? in $(( $(date +%s) - start )) s"
  grep -E '^\{"config"|fio depth|Error|error' "$OUT/peers.log" > "$OUT/peers-rows.txt"
  cat "$OUT/peers/table.md" 2>/dev/null | tee -a "$OUT/summary.txt"
fi
drop_striped_drive
# 2. kvtier's store over the same four drives, and 3. one drive at 4 MiB x 1 (fixed buffers).
make_fast_drives 4 12 | tee -a "$OUT/summary.txt" || exit 1
h200_seed four-4M-x1 /mnt/fast0/m,/mnt/fast1/m,/mnt/fast2/m,/mnt/fast3/m --paths posix \
  --request-size 4M --staging 16M
rm -rf /mnt/fast*/m
h200_seed one-4M-x1 /mnt/fast0/s --paths posix --request-size 4M --staging 4M
rm -rf /mnt/fast0/s
h200_seed one-4M-x2 /mnt/fast0/s --paths posix --request-size 4M --staging 8M
drop_fast_drives
say "total: $(( $(date +%s) - H200_T0 )) s"
