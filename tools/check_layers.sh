#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Fails on an #include that points up kvtier's layers (docs/architecture.md): a file under src/<dir>/
# may include headers of its own directory and of directories of lower layers only, and the public
# headers (include/kvtier/) only each other; and on a CUDA runtime call or header outside src/cuda/.
# Usage: tools/check_layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Rank of each directory under src/, bottom up, as its library declares it in src/CMakeLists.txt
# (kvtier_layer(<dir> RANK <n> ...), whose links enforce the same order for calls). Directories of
# one rank may not include each other.
declare -A rank=()
while read -r dir r; do
  rank[$dir]=$r
done < <(sed -nE 's/^[[:space:]]*kvtier_layer\(([a-z_]+) RANK ([0-9]+).*/\1 \2/p' src/CMakeLists.txt)
((${#rank[@]} > 0)) || { echo "check_layers: no kvtier_layer(<dir> RANK <n>) in src/CMakeLists.txt"; exit 1; }

# Upward includes that exist and are known to be wrong, each as ["file -> header"]=1 with a comment
# saying what is wrong; none today. Not a place to hide a new one; an entry that no longer exists
# must be removed (the check fails on it).
declare -A debt=()

failed=0
declare -A seen=()
while IFS= read -r dir; do
  [[ -v rank[$dir] ]] || { echo "check_layers: src/$dir/ has no layer: declare it in src/CMakeLists.txt (kvtier_layer)"; failed=1; }
done < <(find src -mindepth 1 -maxdepth 1 -type d -printf '%f\n')

while IFS=: read -r file _ target; do
  from=${file#src/}
  from=${from%%/*}
  to=${target%%/*}
  [[ -v rank[$to] && -v rank[$from] && $to != "$from" ]] || continue
  ((rank[$to] < rank[$from])) && continue
  edge="$file -> $target"
  if [[ -v debt[$edge] ]]; then
    seen[$edge]=1
    continue
  fi
  echo "check_layers: $edge: $from (layer ${rank[$from]}) may not include $to (layer ${rank[$to]})"
  failed=1
done < <(grep -rnoE '^#include "[a-z_]+/[^"]+"' src | sed -E 's/:#include "(.*)"$/:\1/')

while IFS=: read -r file _ target; do
  echo "check_layers: $file includes $target: public headers include only kvtier/ headers"
  failed=1
done < <(grep -rnoE '^#include "[^"]+"' include | sed -E 's/:#include "(.*)"$/:\1/' | grep -v ':kvtier/' || true)

# CUDA runtime calls and headers live under src/cuda/ only (the layers above reach the GPU through
# the Device interface). Allowed elsewhere: GPU tests and benchmarks, and the seed benchmark's
# stand-in for a serving engine's KV cache (it plays the caller, who owns that memory).
cuda_allowed='^(src/cuda/|tests/gpu/|bench/|tools/kvtier/seed/bench_kv_cuda\.cpp:|tools/kvtier/seed/bench_kernels\.cu:)'
while IFS= read -r hit; do
  echo "check_layers: $hit: CUDA runtime calls and <cuda_runtime*.h> belong under src/cuda/"
  failed=1
done < <(grep -rnE '(^|[^A-Za-z0-9_])cuda[A-Z][A-Za-z0-9_]*[[:space:]]*\(|^[[:space:]]*#[[:space:]]*include[[:space:]]*<cuda_runtime' \
           --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cc' --include='*.cu' \
           --include='*.cuh' src include tools tests python 2>/dev/null |
         grep -vE "$cuda_allowed" | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)

for edge in "${!debt[@]}"; do
  [[ -v seen[$edge] ]] || { echo "check_layers: known debt '$edge' is gone: remove it from $0"; failed=1; }
done
((failed == 0)) && echo "check_layers: every include points down the layers (${#debt[@]} known exceptions), CUDA calls only under src/cuda/"
exit "$failed"
