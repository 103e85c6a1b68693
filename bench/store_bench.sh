#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The save/restore benchmark against the raw O_DIRECT read ceiling of the same files, recorded:
# runs `kvtier bench` with the given arguments and keeps its table, JSON and machine description
# under docs/results/<name>.{txt,json}.
# Usage: bench/store_bench.sh <name> [kvtier bench arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
name="$1"
shift
kvtier=build/release/tools/kvtier/kvtier
[ -x "$kvtier" ] || tools/setup.sh release
out="docs/results/$name"
{
  echo "command: kvtier bench $* --json $out.json"
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
  echo "store filesystem: $(df -T . | awk 'NR==2 {print $2 " on " $1}')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  "$kvtier" bench "$@" --json "$out.json" 2>/dev/null
} | tee "$out.txt"
