#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Stops the servers bench/remote/start_cluster.sh started in DIR (by the pids in its pid files,
# nothing else) and removes DIR.
# Usage: stop_cluster.sh DIR
set -euo pipefail
dir="${1:?usage: stop_cluster.sh DIR}"
[ -d "$dir" ] || exit 0
pids=()
for f in "$dir"/*.pid; do
  [ -e "$f" ] || continue
  pid="$(cat "$f")"
  # Only a redis-server: a stale pid file must not take down a process that reused the pid.
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q redis-server; then
    kill "$pid" && pids+=("$pid")
  fi
done
for pid in "${pids[@]}"; do
  for ((t = 0; t < 100; t++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
done
rm -rf "$dir"
