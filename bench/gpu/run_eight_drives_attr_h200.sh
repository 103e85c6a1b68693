#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Where eight drives' restore loses to fio: kvtier's store over eight RAM-backed loop drives standing
# in for NVMe (256 MiB segments, one 100K-token TP-2 session into GPU memory, 4M x 1 per drive and
# rank, fio next to it), then destination_bench (liburing + CUDA runtime, none of kvtier's code) on
# the same segment files, one reader per rank and drive, 4 MiB x 1: into a plain buffer, pinned
# memory, and pinned memory copied on to the GPU, each twice in alternating order.
# Results: $OUT/summary.txt and $OUT/runs.tar.gz. Env: OUT, SESSIONS (1), BUDGET_S (540).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
fast_drives_run eight-attr-results 8 6 || exit 1
eight=$(fast_drive_list 8 m)
h200_seed eight-seg256M-4M-x1 "$eight" --paths posix --request-size 4M --staging 32M --segment-size 256M
D=build/h200/bench/kvtier_destination_bench
readers=()
for r in 0 1; do
  for d in 0 1 2 3 4 5 6 7; do
    files=$(ls /mnt/fast$d/m/*/rank${r}of2/seg-*.kvt 2>/dev/null | paste -sd,)
    [ -n "$files" ] && readers+=(--rank "$files")
  done
done
say "destination_bench: $(( ${#readers[@]} / 2 )) readers (rank x drive), 4 MiB x 1 each"
for dest in plain pinned pinned+h2d pinned+h2d pinned plain; do
  say "$dest: $("$D" --request 4194304 --depth 1 --dest "$dest" "${readers[@]}")"
done
h200_seed eight-seg256M-4M-x1-again "$eight" --paths posix --request-size 4M --staging 32M --segment-size 256M
drop_fast_drives
say "total: $(( $(date +%s) - H200_T0 )) s"
