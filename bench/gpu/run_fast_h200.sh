#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Why readers reach ~0.6 of dd on the H200's fast drive, measured: the seed workload (2 ranks,
# 100K-token sessions, into GPU memory) on FAST_DRIVES RAM-backed loop devices (fast_drives.sh),
# with fio replaying each restore's reads as the ceiling, then the same store read with different
# bytes in flight (--staging) and request sizes, dd of the same files, and fio alone on 1..N
# drives. Every output is labeled with the device's nature. Results: $OUT/summary.txt and
# $OUT/fast.tar.gz (every log; the device tool returns at most 8 files).
# Env: SESSIONS (2), FAST_DRIVES (4), DRIVE_GIB (32), OUT.
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
sessions=${SESSIONS:-2}
drives=${FAST_DRIVES:-4}
gib=${DRIVE_GIB:-32}
h200_build || exit 1
final_out=$OUT
OUT=/root/fast-results
rm -rf "$OUT" && mkdir -p "$OUT"
trap 'cp "$OUT/summary.txt" "$final_out/" 2>/dev/null; tar -C /root -czf "$final_out/fast.tar.gz" fast-results runs 2>/dev/null' EXIT
K=build/h200/tools/kvtier/kvtier
command -v fio >/dev/null || { echo "no fio: run bench/gpu/build_fio.sh here first"; exit 1; }
drop_fast_drives 2>/dev/null
make_fast_drives "$drives" "$gib" | tee "$OUT/drives.txt" || exit 1
echo "LABEL: $FAST_DRIVE_LABEL" | tee -a "$OUT/drives.txt"
nproc >> "$OUT/drives.txt"; grep -m1 "model name" /proc/cpuinfo >> "$OUT/drives.txt"

seed() {  # seed NAME ARGS...: one seed run on /mnt/fast0, its store kept for the next
  local name=$1 start
  shift
  start=$(date +%s)
  stdbuf -oL "$K" bench --workload seed --store /mnt/fast0/seed --sessions "$sessions" --tokens 100000 \
    --keep --no-report --out "/root/runs/$name" "$@" 2>&1 | grep -v "%$" > "$OUT/$name.txt"
  echo "== $name ($*): $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  grep -E "^\| (posix|gds)|fio ceiling|WARNING" "$OUT/$name.txt" | tee -a "$OUT/summary.txt"
}

# 1. The workload with both paths (cuFile compat mode: no P2P on this VM), default staging 128M.
seed seed-default --paths posix,gds
# 2. dd of the same segment files, one reader per rank (as the issue measured), page cache dropped.
sync; echo 3 > /proc/sys/vm/drop_caches
start=$(date +%s%N)
for r in 0 1; do
  (for f in /mnt/fast0/seed/seed-chunk256/rank${r}of2/seg-*.kvt; do
     dd if="$f" of=/dev/null bs=16M iflag=direct 2>/dev/null; done) &
done
wait
end=$(date +%s%N)
bytes=$(du -cb /mnt/fast0/seed/seed-chunk256/rank*of2/seg-*.kvt | tail -1 | cut -f1)
python3 -c "import sys; b, ns = int(sys.argv[1]), int(sys.argv[2]); print(f'dd (2 readers, 16M, O_DIRECT, whole \
segment files): {b / 1e9:.2f} GB in {ns / 1e9:.3f} s = {b / ns:.2f} GB/s')" "$bytes" "$((end - start))" \
  | tee -a "$OUT/summary.txt"
# 3. Bytes in flight and request size: same store, posix only.
seed staging-32M --paths posix --staging 32M
seed staging-512M --paths posix --staging 512M
seed request-4M --paths posix --request-size 4M --staging 32M
# 4. fio alone on 1, 2, 4 drives: how the RAM-backed device scales (one job per drive, 16M, depth 1 and 8).
for n in 1 2 4; do
  ((n > drives)) && break
  for d in 1 8; do
    files=""
    for ((i = 0; i < n; i++)); do files+="--name=d$i --filename=/mnt/fast$i/fio.dat "; done
    # shellcheck disable=SC2086
    fio --ioengine=io_uring --direct=1 --rw=read --bs=16M --iodepth=$d --size=4G --group_reporting \
      --output-format=json $files > "$OUT/fio-alone-$n-$d.json" 2>&1
    python3 -c "import json, sys; t = open(sys.argv[1]).read(); j = json.loads(t[t.find('{'):]); \
print(f'fio alone: {sys.argv[2]} drive(s), depth {sys.argv[3]}, 16M: {j[\"jobs\"][0][\"read\"][\"bw_bytes\"] / 1e9:.2f} GB/s')" \
      "$OUT/fio-alone-$n-$d.json" "$n" "$d" | tee -a "$OUT/summary.txt"
  done
done
drop_fast_drives
