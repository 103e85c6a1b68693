#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Starts a Redis Cluster of redis-server processes on 127.0.0.1 for `kvtier bench --workload
# shared` (which takes --remote seeds and starts no cluster itself); bench/remote/stop_cluster.sh
# stops it.
#
# Usage: start_cluster.sh DIR FIRST_PORT [REPLICAS_PER_MASTER (1)] [MASTERS (3)]
#   DIR: made for the servers' logs, pid files and node tables (must not hold a running cluster).
#   Ports FIRST_PORT .. FIRST_PORT + MASTERS * (1 + REPLICAS) - 1.
# Environment: REDIS_SERVER, REDIS_CLI (default: from PATH; the H200 script points them into
# .deps), KVTIER_REDIS_PASSWORD (requirepass and masterauth when set), REDIS_MAXMEMORY (e.g. 8gb,
# with allkeys-lru; default: none).
# Prints the seeds, redis://127.0.0.1:P,..., as its last line.
set -euo pipefail
dir="${1:?usage: start_cluster.sh DIR FIRST_PORT [REPLICAS] [MASTERS]}"
first="${2:?usage: start_cluster.sh DIR FIRST_PORT [REPLICAS] [MASTERS]}"
replicas="${3:-1}"
masters="${4:-3}"
server="${REDIS_SERVER:-redis-server}"
cli="${REDIS_CLI:-redis-cli}"
count=$((masters * (1 + replicas)))
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
auth=()
[ -n "${KVTIER_REDIS_PASSWORD:-}" ] && auth=(-a "$KVTIER_REDIS_PASSWORD" --no-auth-warning)

for ((i = 0; i < count; i++)); do
  port=$((first + i))
  if "$cli" -p "$port" "${auth[@]}" ping >/dev/null 2>&1; then
    echo "start_cluster: something already answers on port $port" >&2
    exit 1
  fi
  args=(--port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes
        --pidfile "$dir/$port.pid" --logfile "$dir/$port.log" --save "" --appendonly no
        --dbfilename "$port.rdb" --cluster-enabled yes --cluster-config-file "$port.nodes.conf"
        # Failover after 5 s of silence: long enough that a busy two-core machine running the
        # benchmark is not taken for a dead master.
        --cluster-node-timeout 5000
        # Records are MBs each and a save writes GBs behind: a replica's bounded output buffer
        # would cut it off and resynchronize it over and over.
        --client-output-buffer-limit "replica 0 0 0")
  [ -n "${KVTIER_REDIS_PASSWORD:-}" ] &&
    args+=(--requirepass "$KVTIER_REDIS_PASSWORD" --masterauth "$KVTIER_REDIS_PASSWORD")
  [ -n "${REDIS_MAXMEMORY:-}" ] && args+=(--maxmemory "$REDIS_MAXMEMORY" --maxmemory-policy allkeys-lru)
  "$server" "${args[@]}"
done

nodes=()
for ((i = 0; i < count; i++)); do
  port=$((first + i))
  for ((t = 0; t < 100; t++)); do
    "$cli" -p "$port" "${auth[@]}" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$cli" -p "$port" "${auth[@]}" ping >/dev/null || { echo "start_cluster: port $port did not start (see $dir/$port.log)" >&2; exit 1; }
  nodes+=("127.0.0.1:$port")
done

"$cli" --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes "${auth[@]}" >"$dir/create.log"

# Ready when every node reports cluster_state:ok and sees every replica as one (cluster_state:ok
# comes first).
for ((t = 0; t < 300; t++)); do
  ready=1
  for ((i = 0; i < count; i++)); do
    port=$((first + i))
    "$cli" -p "$port" "${auth[@]}" cluster info | grep -q "cluster_state:ok" || { ready=0; break; }
    seen="$("$cli" -p "$port" "${auth[@]}" cluster nodes | grep -c slave || true)"
    [ "$seen" -eq $((masters * replicas)) ] || { ready=0; break; }
  done
  [ "$ready" -eq 1 ] && break
  sleep 0.1
done
[ "$ready" -eq 1 ] || { echo "start_cluster: the cluster did not converge (see $dir)" >&2; exit 1; }

seeds=""
for ((i = 0; i < count; i++)); do seeds+="${seeds:+,}127.0.0.1:$((first + i))"; done
echo "start_cluster: $masters masters, $((masters * replicas)) replicas in $dir" >&2
echo "redis://$seeds"
