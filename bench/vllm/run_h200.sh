#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The serving benchmark (bench/vllm/serve_bench.py) on the H200 machine, whose image has torch 2.11
# but not vLLM. vLLM 0.26.0 travels in parts (../shared/tools/pack_vllm_h200.sh: p00, p01, p02, sum,
# deps/*.whl), at most 64 MiB a call, so the work is split into steps, one device call each, back to
# back (what lies under /root stays while the machine stays warm, 30 s after a call):
#   run_h200.sh part DIR      copy the part(s) carried in DIR (.vpA, .vpB: p00, p01) to /root/vp
#   run_h200.sh install       with .vp (p02, sum, deps/) and .deps carried: join and check the parts,
#                             unpack vLLM and its wheels under /root/site, build kvtier with the
#                             Python module
#   run_h200.sh bench ARGS    LMCache's wheels (.whl-lmc) too, fast drives, then serve_bench.py ARGS;
#                             a 4-layer smoke run first when SMOKE=1
# Env: FAST_DRIVES (count, default 1; 0: the VM's virtio disk under /root), FAST_GIB (per drive, 64),
# LAYERS (the model's layers, default 48: Qwen3-Coder-30B-A3B's shape, random weights); MODEL=NAME:
# bench/vllm/model-NAME instead, taken as it is, for `bench --configs recompute,kvtier-hybrid
# --no-prefix-caching` (its outputs against the recompute's are the hybrid connector's check):
# hybrid (Granite-4.0-H's architecture, Mamba2 layers with one attention layer in four, scaled down)
# or window (a Llama with three sliding-window layers of 4,096 tokens in four); random weights.
set -uo pipefail
cd "$(dirname "$0")/../.."
step=${1:?usage: run_h200.sh part|install|bench ARGS}
shift
OUT="${OUT:-/tmp/kvtier-out}"
mkdir -p "$OUT" /root/vp /root/site

vllm_env() {
  export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/build/h200/python:/root/site"
  # flashinfer does not travel (97 MB): without its sampler vLLM picks FLASH_ATTN (FA3) and Triton MoE.
  export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-INFO}
}

case "$step" in
  part)
    cp -v "${1:?part DIR}"/p[0-9]* /root/vp/ && ls -la /root/vp
    ;;
  install)
    cp .vp/p[0-9]* .vp/sum /root/vp/ 2>/dev/null
    start=$(date +%s)
    cat /root/vp/p[0-9]* > /root/v.tar.xz
    if [ "$(sha256sum /root/v.tar.xz | cut -c1-64)" != "$(cat /root/vp/sum)" ]; then
      echo "install: the parts do not join to the packed vLLM (sha256 differs): $(ls /root/vp)"; exit 1
    fi
    tar -C /root/site -xJf /root/v.tar.xz && rm /root/v.tar.xz
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site .vp/deps/*.whl \
      > "$OUT/pip.log" 2>&1 || { tail -5 "$OUT/pip.log"; exit 1; }
    echo "vLLM unpacked and its wheels installed in $(( $(date +%s) - start )) s"
    source bench/gpu/h200_common.sh
    h200_build || exit 1
    vllm_env
    python3 -c "import vllm, torch, kvtier, kvtier.vllm_connector; print('vllm', vllm.__version__, 'torch', torch.__version__, 'kvtier', kvtier.__file__)"
    ;;
  bench)
    t0=$(date +%s)
    source bench/gpu/h200_common.sh
    source bench/gpu/fast_drives.sh
    h200_build || exit 1
    h200_udev_entry
    vllm_env
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/site \
      .whl-lmc/*.whl > "$OUT/pip-lmc.log" 2>&1 || tail -5 "$OUT/pip-lmc.log"
    so=$(python3 -c "import glob, nvidia, os; print((sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '**', 'libcufile.so.0'), recursive=True)) + [''])[0])" 2>/dev/null)
    if [ -n "$so" ]; then  # cufile-python (LMCache) opens the unversioned name
      mkdir -p /tmp/cufile-lib && ln -sf "$so" /tmp/cufile-lib/libcufile.so
      export LD_LIBRARY_PATH=/tmp/cufile-lib:$LD_LIBRARY_PATH
    fi
    res=/root/serve-results  # the call's OUT takes 8 files: everything goes back as one tarball
    rm -rf "$res" && mkdir -p "$res"
    trap 'tar -C /root -czf "$OUT/serve-results.tar.gz" serve-results' EXIT
    n=${FAST_DRIVES:-1}
    if [ "$n" -gt 0 ]; then
      if [ "$(ls -d /mnt/fast* 2>/dev/null | while read -r m; do mountpoint -q "$m" && echo "$m"; done | wc -l)" != "$n" ]; then
        drop_fast_drives 2>/dev/null
        make_fast_drives "$n" "${FAST_GIB:-48}" || exit 1
      fi
      echo "LABEL: $FAST_DRIVE_LABEL"
    fi
    # DRIVE: where the one-drive configurations keep their stores (default the first fast drive;
    # "virtio": the VM's own disk under /root).
    drive=${DRIVE:-/mnt/fast0}
    if [ "$drive" = virtio ] || [ "$n" = 0 ]; then
      drive=/root/serve-store
      echo "one-drive stores on the VM's virtio disk ($(findmnt -n -o SOURCE --target /root))"
    fi
    mkdir -p "$drive"
    drives=$(fast_drive_list "$n" .)
    model=/root/model
    mkdir -p "$model"
    python3 - "$model" "${LAYERS:-48}" "${MODEL:-}" <<'EOF'
import json, sys
if sys.argv[3]:  # its layer kinds are listed per layer: taken as it is
    c = json.load(open(f"bench/vllm/model-{sys.argv[3]}/config.json"))
else:
    c = json.load(open("bench/vllm/model/config.json"))
    c["num_hidden_layers"] = c["max_window_layers"] = int(sys.argv[2])
json.dump(c, open(sys.argv[1] + "/config.json", "w"), indent=1)
EOF
    nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    free -g | head -2
    if [ "${SMOKE:-0}" = 1 ]; then
      smoke=/root/smoke
      if [ -n "${MODEL:-}" ]; then
        smoke=$model  # already small
      else
        mkdir -p "$smoke" && python3 - "$smoke" <<'EOF'
import json, sys
c = json.load(open("bench/vllm/model/config.json"))
c["num_hidden_layers"] = c["max_window_layers"] = 4
json.dump(c, open(sys.argv[1] + "/config.json", "w"), indent=1)
EOF
      fi
      timeout 200 python3 bench/vllm/serve_bench.py --model-dir "$smoke" --drive "$drive" --drives "$drives" \
        --out "$res/smoke" --prompts 1 --min-tokens 8000 --max-tokens 8200 --max-model-len 16384 \
        --configs "${SMOKE_CONFIGS:-kvtier-posix}" --deadline 190 $( [ -n "${MODEL:-}" ] && echo --no-prefix-caching)
    fi
    start=$(date +%s)
    left=$(( ${BUDGET_S:-560} - (start - t0) ))
    echo "serve_bench: $left s left for it"
    python3 bench/vllm/serve_bench.py --model-dir "$model" --drive "$drive" --drives "$drives" --out "$res/serve" \
      --deadline "$left" "$@"
    echo "serve_bench: $(( $(date +%s) - start )) s"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
    ;;
  *)
    echo "run_h200.sh: unknown step $step" >&2
    exit 2
    ;;
esac
