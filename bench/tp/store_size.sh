#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Store usage per TP size (issue 27): every rank of TP 1, 2, 4 and 8 saves the same session with
# `kvtier put`, into a store per rank (format 1) and into a TP-free store (format 2); the bytes the
# store's records hold are read back with `kvtier stat` (live_bytes of each distinct store the ranks
# open, so a store that ranks share counts once). An MLA model (deepseek-v3: one latent every rank
# holds) against a GQA one (llama-3-70b, 8 KV heads split over the ranks).
# Usage: bench/tp/store_size.sh [TOKENS] [DIR]   (TOKENS 8192; DIR a scratch directory, emptied)
# Prints a markdown table; needs build/release (cmake --preset release).
set -euo pipefail
cd "$(dirname "$0")/../.."
tokens=${1:-8192}
dir=${2:-/tmp/kvtier-store-size}
K=${KVTIER:-build/release/tools/kvtier/kvtier}
[ -x "$K" ] || { echo "no $K: cmake --preset release && cmake --build --preset release" >&2; exit 1; }

# live bytes of every distinct store that the ranks of TP `world` open
live_bytes() {
  local store=$1 model=$2 format=$3 world=$4 r
  for ((r = 0; r < world; r++)); do
    "$K" stat --store "$store" --model "$model" --store-format "$format" --tp-world "$world" --tp-rank "$r" --json \
      | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["store"], d["live_bytes"], d["records"])'
  done | sort -u | python3 -c 'import sys; rows = [l.split() for l in sys.stdin]
print(sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows))'
}

echo "| model | TP | a store per rank (format 1): bytes (records) | TP-free: bytes (records) | TP-free / TP-free at TP 1 | TP-free / format 1, or (MLA) / a copy per rank (TP x TP-free at TP 1) |"
echo "|---|---|---|---|---|---|"
for model in deepseek-v3 llama-3-70b; do
  base=""
  for world in 1 2 4 8; do
    b1=""
    n1=""
    for format in 1 2; do
      rm -rf "$dir"
      ok=1
      for ((r = 0; r < world; r++)); do
        if ! err=$("$K" put --store "$dir" --model "$model" --store-format "$format" --tp-world "$world" \
          --tp-rank "$r" --tokens "$tokens" --seed 1 2>&1 > /dev/null); then
          echo "$model TP $world format $format: ${err##*$'\n'}" >&2
          ok=0
          break
        fi
      done
      if ((ok)); then
        read -r b n <<< "$(live_bytes "$dir" "$model" "$format" "$world")"
        if ((format == 1)); then b1=$b; n1=$n; else b2=$b; n2=$n; fi
      elif ((format == 2)); then
        echo "kvtier put failed: $model TP $world format 2" >&2
        exit 1
      fi
    done
    [ -n "$base" ] || base=$b2
    python3 -c 'import sys; m, w, b1, n1, b2, n2, base = sys.argv[1:]; w, b2, base = int(w), int(b2), int(base)
f1 = f"{int(b1):,} ({n1})" if b1 else "refused by format 1"
print(f"| {m} | {w} | {f1} | {b2:,} ({n2}) | {b2 / base:.3f} | {b2 / (int(b1) if b1 else w * base):.3f} |")' \
      "$model" "$world" "$b1" "$n1" "$b2" "$n2" "$base"
  done
done
rm -rf "$dir"
echo
echo "$tokens tokens, one session (seed 1), chunk 256; $(uname -n), $(date -u +%F)"
