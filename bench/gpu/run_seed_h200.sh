#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The seed evaluation on the H200 machine: build with CUDA (reusing build/h200), optionally run the
# tests, give cuFile its udev entry (device-notes.md: a setup step of that test machine, never done
# by kvtier), then `kvtier bench --workload seed $SEED_ARGS`. The run directory comes back as one
# tarball (the device tool returns at most 8 files) plus its table.
# Env: SEED_ARGS (bench flags), RUN_TESTS=1 (ctest first), OUT (results).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
h200_build || exit 1
if [ -n "${RUN_TESTS:-}" ]; then h200_tests; fi
h200_udev_entry
if [ -n "${RUN_TESTS:-}" ]; then h200_gds_tests; fi
rm -rf /root/seed-store /root/seed-run
start=$(date +%s)
# shellcheck disable=SC2086
stdbuf -oL build/h200/tools/kvtier/kvtier bench --workload seed --store /root/seed-store --out /root/seed-run \
  ${SEED_ARGS:-} 2>&1 | grep -v "%$" | tee "$OUT/seed.txt"
echo "seed: $(( $(date +%s) - start )) s"
tar -C /root -czf "$OUT/seed-run.tar.gz" seed-run
rm -rf /root/seed-store
