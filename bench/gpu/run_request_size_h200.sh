#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# One RAM-backed loop drive standing in for NVMe (fast_drives.sh): the seed workload's posix restore
# (one 100K-token TP-2 session into GPU memory, fio's ceiling next to each) at one request in flight
# per rank with 4, 8 and 16 MiB requests, 16 MiB x 2, and the defaults (16 MiB x 8): which request
# size keeps this device's pattern (few bytes in flight) at the least CPU per GB.
# Results: $OUT/summary.txt and $OUT/runs.tar.gz. Env: OUT, SESSIONS (1), BUDGET_S (540).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
source "$(dirname "$0")/fast_drives.sh"
fast_drives_run request-size-results 1 30 || exit 1
# One store, written by the first run and read by the others (--keep).
h200_seed one-4M-x1 /mnt/fast0/s --paths posix --request-size 4M --staging 4M
h200_seed one-8M-x1 /mnt/fast0/s --paths posix --request-size 8M --staging 8M
h200_seed one-16M-x1 /mnt/fast0/s --paths posix --request-size 16M --staging 16M
h200_seed one-16M-x2 /mnt/fast0/s --paths posix --request-size 16M --staging 32M
h200_seed one-default /mnt/fast0/s --paths posix
h200_seed one-4M-x1-again /mnt/fast0/s --paths posix --request-size 4M --staging 4M
drop_fast_drives
say "total: $(( $(date +%s) - H200_T0 )) s"
