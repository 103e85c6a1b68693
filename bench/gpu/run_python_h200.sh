#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The Python-side benchmarks on the H200 machine, in one call: build (with the Python module), give
# cuFile its udev entry (device-notes.md), then
#   - bench/peers/peers_bench.py: kvtier vs KvikIO, a naive PyTorch loader and LMCache (peer wheels
#     travel in .whl/, fetched here by bench/gpu/fetch_peer_wheels.sh, installed under /tmp/site),
#     same files, same run;
#   - bench/model/restore_vs_recompute.py: Qwen3-MoE (random weights) prefill vs kvtier restore.
# Env: OUT (results), PEERS_ARGS, MODEL_ARGS, MODEL_TIMEOUT (s, default 300), SKIP_PEERS, SKIP_MODEL.
set -uo pipefail
source "$(dirname "$0")/h200_common.sh"
h200_build || exit 1
h200_udev_entry
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/build/h200/python:/tmp/site"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || tail -5 "$OUT/pip.log"
fi
# cufile-python (LMCache's GDS backend) opens "libcufile.so"; the image has only the versioned name
so=$(python3 -c "import glob, nvidia, os; print((sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '**', 'libcufile.so.0'), recursive=True)) + [''])[0])" 2>/dev/null)
if [ -n "$so" ]; then
  mkdir -p /tmp/cufile-lib && ln -sf "$so" /tmp/cufile-lib/libcufile.so
  export LD_LIBRARY_PATH=/tmp/cufile-lib:$LD_LIBRARY_PATH
fi
if [ -z "${SKIP_PEERS:-}" ]; then
  rm -rf /root/peers
  start=$(date +%s)
  # shellcheck disable=SC2086
  python3 bench/peers/peers_bench.py --dir /root/peers --out "$OUT/peers" ${PEERS_ARGS:-} 2>&1 | tee "$OUT/peers.txt"
  echo "peers: $(( $(date +%s) - start )) s"
  rm -rf /root/peers
fi
if [ -z "${SKIP_MODEL:-}" ]; then
  rm -rf /root/model-store
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout "${MODEL_TIMEOUT:-300}" python3 bench/model/restore_vs_recompute.py --store /root/model-store \
    --out "$OUT/model" ${MODEL_ARGS:-} 2>&1 | grep -v "^W1203" | tee "$OUT/model.txt"
  echo "model: $(( $(date +%s) - start )) s"
  rm -rf /root/model-store
fi
