#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The second fast-drive run (docs/perf.md "fast drives"): on RAM-backed loop devices standing in for
# NVMe (fast_drives.sh), the seed workload at the device's best reading pattern (4 MiB, one or two
# in flight), the destination attributed without kvtier's code (destination_bench.cpp: plain,
# pinned, pinned + copy to the GPU), a store over 2 and 4 drives with fio's aggregate ceiling, and
# the virtio-disk seed run again (nothing may regress). Results: $OUT/summary.txt, $OUT/runs.tar.gz.
# Env: SESSIONS (2), OUT.
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
sessions=${SESSIONS:-2}
h200_build || exit 1
final_out=$OUT
OUT=/root/attr-results
rm -rf "$OUT" /root/runs && mkdir -p "$OUT" /root/runs
trap 'cp "$OUT/summary.txt" "$final_out/" 2>/dev/null; tar -C /root -czf "$final_out/runs.tar.gz" attr-results runs 2>/dev/null' EXIT
K=build/h200/tools/kvtier/kvtier
D=build/h200/bench/kvtier_destination_bench
command -v fio >/dev/null || { echo "no fio: bench/gpu/build_fio.sh makes .deps/fio"; exit 1; }
drop_fast_drives 2>/dev/null
make_fast_drives 4 26 | tee "$OUT/drives.txt" || exit 1
h200_udev_entry  # the virtio disk's entry too, for the gds row of the virtio run

seed() {  # seed NAME STORE ARGS...
  local name=$1 store=$2 start
  shift 2
  start=$(date +%s)
  stdbuf -oL "$K" bench --workload seed --store "$store" --sessions "$sessions" --tokens 100000 --keep \
    --no-report --out "/root/runs/$name" "$@" 2>&1 | grep -v "%$" > "$OUT/$name.txt"
  echo "== $name (--store $store $*): $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  grep -E "^\| (posix|gds)|fio ceiling|WARNING|ERROR" "$OUT/$name.txt" | tee -a "$OUT/summary.txt"
}
echo "LABEL: $FAST_DRIVE_LABEL" >> "$OUT/summary.txt"

# 1. One drive at the device's best pattern: 4 MiB requests, one or two in flight per rank.
seed one-4M-x1 /mnt/fast0/s --paths posix,gds --request-size 4M --staging 4M
seed one-4M-x2 /mnt/fast0/s --paths posix --request-size 4M --staging 8M
# 2. The destination without kvtier: the same segment files, one reader per rank.
r0=$(ls /mnt/fast0/s/seed-chunk256/rank0of2/seg-*.kvt | paste -sd,)
r1=$(ls /mnt/fast0/s/seed-chunk256/rank1of2/seg-*.kvt | paste -sd,)
for pattern in "4194304 1" "16777216 8"; do
  set -- $pattern
  for dest in plain pinned pinned+h2d; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    "$D" --request "$1" --depth "$2" --dest "$dest" --rank "$r0" --rank "$r1" | tee -a "$OUT/summary.txt"
  done
done
rm -rf /mnt/fast0/s
# 3. A store over 2 and 4 drives (their records spread by room), posix and cuFile compat.
seed two-drives /mnt/fast0/m,/mnt/fast1/m --paths posix,gds
rm -rf /mnt/fast*/m
seed four-drives /mnt/fast0/m,/mnt/fast1/m,/mnt/fast2/m,/mnt/fast3/m --paths posix,gds
rm -rf /mnt/fast*/m
drop_fast_drives
# 4. The virtio disk again (the earlier seed runs' device): one session.
sessions=1 seed virtio /root/seed-virtio --paths posix,gds
rm -rf /root/seed-virtio
