#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The two cases reported to drop valid records (issue 15), with the code before the fix and after,
# on a RAM-backed loop device standing in for NVMe, on tmpfs and on the virtio disk.
# Layout it expects (both git-ignored, carried by the device call): .h200old = `git archive 6d9bdd6`,
# .h200src = `git archive HEAD`, each with .deps/ and .whl/ (bench/gpu/fetch_debs.sh); run from
# .h200src as `bash bench/gpu/repro_old_vs_new_h200.sh`. Results: $OUT/summary.txt.
set -uo pipefail
export OUT
for d in .h200old .h200src; do (cd ../$d && source bench/gpu/h200_common.sh && python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl 2>/dev/null; PYTHONPATH=/tmp/site h200_build) || exit 1; done
source bench/gpu/h200_common.sh
h200_udev_entry
truncate -s 20G /dev/shm/fast.img
dev=$(losetup --direct-io=on -f --show /dev/shm/fast.img); mkfs.ext4 -q -F "$dev"; mkdir -p /mnt/fast; mount "$dev" /mnt/fast
mm=$(mountpoint -d /mnt/fast); printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > "/run/udev/data/b$mm"
echo "loop: $dev $mm"
for where in /mnt/fast /dev/shm/kv /root/kv; do
  for d in old src; do
    for pf in "" "1,255,256,257"; do
      tag="$(basename $where)_${d}_${pf//,/_}"
      echo "== store $where code $d prefixes [$pf]"
      PYTHONPATH=../.h200$d/build/h200/python:/tmp/site PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/stream_race_repro.py "$where/r" \
        --trials "${TRIALS:-1}" --orderings "after the caller's stream" --prefixes "$pf" --json "$OUT/$tag.json" > "$OUT/$tag.log" 2>&1
      python3 -c "
import json,sys
for r in json.load(open(sys.argv[1])):
    print(' ', r.get('case'), r.get('io'), 'restored', r.get('restored'), '/', r.get('tokens'), 'dropped', r.get('dropped'), 'kept', r.get('kept_by_reread'), 'exact', r.get('restored_bytes_exact'), r.get('error',''))
" "$OUT/$tag.json" 2>&1 | tee -a "$OUT/summary.txt"
    done
  done
done
tar -C "$OUT" -czf "$OUT/repro_logs.tar.gz" --exclude=repro_logs.tar.gz --exclude=summary.txt . 2>/dev/null
find "$OUT" -maxdepth 1 -type f ! -name repro_logs.tar.gz ! -name summary.txt -delete
