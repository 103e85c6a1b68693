#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Eight RAM-backed loop drives standing in for NVMe (fast_drives.sh), kvtier's store over all of
# them: the seed workload (one 100K-token TP-2 session into GPU memory, fio's aggregate ceiling next
# to each restore) at 4 MiB x 1 per drive and rank (posix and cuFile compat), at the defaults
# (16 MiB requests, 128 MiB staging: 16 MiB x 1 per drive), then the same with 256 MiB segments:
# how far the store scales toward the GPU's PCIe link (~55 GB/s pinned host to device) on this
# 16-core VM.
# Results: $OUT/summary.txt and $OUT/runs.tar.gz. Env: OUT, SESSIONS (1), BUDGET_S (540).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
fast_drives_run eight-drive-results 8 6 || exit 1
eight=$(fast_drive_list 8 m)
# One store over the eight drives, written by the first run and read by the others (--keep).
h200_seed eight-4M-x1 "$eight" --paths posix,gds --request-size 4M --staging 32M
h200_seed eight-default "$eight" --paths posix
du -sh /mnt/fast*/m 2>/dev/null | tee -a "$OUT/summary.txt"
# Smaller segments spread each rank's part of one session over more drives (a rank's ~4.9 GB in
# 1 GiB segments spans five drives at most).
rm -rf /mnt/fast*/m
h200_seed eight-seg256M-4M-x1 "$eight" --paths posix,gds --request-size 4M --staging 32M --segment-size 256M
h200_seed eight-seg256M-default "$eight" --paths posix --segment-size 256M
du -sh /mnt/fast*/m 2>/dev/null | tee -a "$OUT/summary.txt"
drop_fast_drives
say "total: $(( $(date +%s) - H200_T0 )) s"
