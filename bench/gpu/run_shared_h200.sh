#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The shared workload on the H200 machine (no network, no redis on the image: redis-server,
# redis-cli and hiredis come from .deps, bench/gpu/fetch_debs.sh): build with CUDA and hiredis
# (reusing build/h200), run the redis-labelled tests, start a 3-master + 3-replica cluster on
# 127.0.0.1 from the .deps binaries, run `kvtier bench --workload shared` with the KV in GPU
# memory, stop the cluster. Results under $OUT: the tests' log, the bench's output, its run
# directory as one tarball (the device tool returns at most 8 files).
# Env: SHARED_ARGS (bench flags; default 2 sessions of ~100K tokens, 3 rounds: the cluster holds
# every value twice in host memory, and node B's own store takes one copy on the 64 GiB disk),
# SKIP_TESTS=1 (bench only), OUT (results).
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
  || { echo "run_shared_h200: no redis-server/redis-cli (run bench/gpu/fetch_debs.sh first)"; exit 1; }
# A build/h200 configured before hiredis was there is configured again, with the remote tier
# required this time.
if [ -f build/h200/CMakeCache.txt ] && ! grep -q "^HIREDIS_FOUND:INTERNAL=1" build/h200/CMakeCache.txt; then
  rm -f build/h200/build.ninja
fi
KVTIER_WITH_REDIS=ON h200_build || exit 1
if [ -z "${SKIP_TESTS:-}" ]; then
  start=$(date +%s)
  ctest --test-dir build/h200 -L redis --output-on-failure > "$OUT/redis_tests.log" 2>&1
  grep -E "tests passed|Failed|\(Failed\)|\*\*\*" "$OUT/redis_tests.log" | tail -15
  echo "redis tests: $(( $(date +%s) - start )) s"
fi

cluster=/root/shared-cluster
bench/remote/stop_cluster.sh "$cluster"
seeds=$(bench/remote/start_cluster.sh "$cluster" 7100 1 3) || { echo "run_shared_h200: no cluster"; exit 1; }
trap 'bench/remote/stop_cluster.sh "$cluster"' EXIT
rm -rf /root/shared-store /root/shared-run
start=$(date +%s)
# shellcheck disable=SC2086
stdbuf -oL build/h200/tools/kvtier/kvtier bench --workload shared --remote "$seeds" --device cuda \
  --store /root/shared-store --out /root/shared-run ${SHARED_ARGS:---sessions 2 --repeat 3} 2>&1 \
  | grep -v "%$" | tee "$OUT/shared.txt"
echo "shared: $(( $(date +%s) - start )) s"
redis-cli -p 7100 info memory | grep -E "used_memory_human|maxmemory_human" > "$OUT/redis_memory.txt"
tar -C /root -czf "$OUT/shared-run.tar.gz" shared-run
rm -rf /root/shared-store
