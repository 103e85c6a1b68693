#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Fails on an #include that points up kvtier's layers (docs/architecture.md): a file under src/<dir>/
# may include headers of its own directory and of directories of lower layers only, and the public
# headers (include/kvtier/) only each other. Usage: tools/check_layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Rank of each directory under src/, bottom up. Directories of one rank may not include each other.
declare -A rank=(
  [common]=0
  [store]=1 [io]=1 [device]=1 [metrics]=1 [remote]=1
  [cuda]=2
  [datapath]=3
  [engine]=4
)

# Upward includes that exist and are known to be wrong, each with what is wrong. No other may be
# added; an entry that no longer exists must be removed (the check fails on it).
declare -A debt=(
  # GDS registers the store's SegmentFile (fd, path, size) instead of a plain file handle of its
  # own, so the I/O layer depends on the store's type; it should take an fd and a path.
  ["src/io/gds/gds.hpp -> store/segment.hpp"]=1
)

failed=0
declare -A seen=()
while IFS= read -r dir; do
  [[ -v rank[$dir] ]] || { echo "check_layers: src/$dir/ has no layer: add it to rank in $0"; failed=1; }
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

for edge in "${!debt[@]}"; do
  [[ -v seen[$edge] ]] || { echo "check_layers: known debt '$edge' is gone: remove it from $0"; failed=1; }
done
((failed == 0)) && echo "check_layers: every include points down the layers (${#debt[@]} known exception)"
exit "$failed"
