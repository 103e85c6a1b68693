#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The H200 machine's benchmarks and GPU checks, one named scenario per device call (usage below).
# Shared steps live in h200_common.sh (build, tests, cuFile's udev entry, results) and
# fast_drives.sh (RAM-backed loop devices standing in for NVMe). The vLLM serving run is
# bench/vllm/run_h200.sh.
set -uo pipefail
here=$(dirname "$0")

usage() {
  cat <<'EOF'
usage: bench/gpu/h200.sh SCENARIO [ARGS]   (on the H200 machine, from the repository root)

Every scenario builds build/h200 with CUDA (kept while the machine stays warm), and returns
$OUT/summary.txt plus $OUT/runs.tar.gz (every log and run directory). With TESTS=1 it runs the
`tests` scenario first. Scenarios on fast drives use RAM-backed loop devices standing in for NVMe
(fast_drives.sh) and say so in their output; seed runs there take fio's ceiling, so they need
.deps/fio (bench/gpu/build_fio.sh).

  tests                  every test without cuFile's udev entry (GDS must fall back and say why),
                         then the GPU tests with it (cuFile in compat mode); redis-labelled tests
                         too when .deps holds redis and hiredis (fetch_debs.sh)
  verify                 tests, the seed workload on the virtio disk (posix, gds, dram; one
                         100K-token session: nothing may regress), then `shared` with one session
  gpu-bench [TOKENS [REPEATS]]
                         kvtier_gpu_bench (restore paths into vLLM's paged layout, scatter kernel
                         against D2D, pinned H2D, DRAM tier) and a dd ceiling; 100000 tokens, 3
  seed [BENCH ARGS]      kvtier bench --workload seed on the virtio disk, e.g. `--sessions 4
                         --chunk-sweep 1024` or `--concurrency 1,2,4,8,16 --tokens 8192 --host-load 4`
  shared [BENCH ARGS]    kvtier bench --workload shared into GPU memory against a 3-master +
                         3-replica Redis Cluster on loopback (default `--sessions 2 --repeat 3`)
  reliability            GPU tests with cuFile's udev entry, the wide GPU property slice
                         (PROPERTY_CASES 500, PROPERTY_MAX_MB 64, KVTIER_TEST_SEED), the PyTorch
                         tests, then the GPU tests without the entry
  peers [PEERS ARGS]     bench/peers/peers_bench.py on the virtio disk (KvikIO, LMCache, a naive
                         loader; wheels in .whl/, fetch_peer_wheels.sh), e.g. `--repeats 2 --warm`
  model [MODEL ARGS]     bench/model/restore_vs_recompute.py: Qwen3-MoE prefill against a restore
                         (MODEL_TIMEOUT, default 300 s)
  one-drive              one fast drive: dd of the store's files, then the seed restore at
                         4M x 1 (posix and gds), 8M x 1, 16M x 1, 16M x 2, 16M x 32, the defaults
                         (16M x 8) and 4M x 1 again: bytes in flight and request size against
                         rate and CPU per GB
  tuned N [SEED ARGS]    a store over N fast drives at kvtier's defaults (each drive's tuning, found
                         by its read probe, whole for each rank), twice, against fio's best request
                         size and depth (and destination_bench at that pattern into a plain
                         buffer and into the GPU), and between them the two ranks sharing the
                         tuning, as flags (as before each took the whole; TUNED_SHARED=0: not,
                         2: once more at the end); TUNED_PATHS (posix,gds) the paths of the default runs;
                         N > 1: then 1, 2, 4, 8 sessions of 25K tokens restored at once
                         (TUNED_CONCURRENT=0: not)
  tp-change [N [SEED ARGS]]
                         TP-free stores over N fast drives (4) saved at TP 2, 8, 1, 4 (TP_SAVED) and
                         restored at TP 1, 2, 4, 8 each (TP_RESTORED; llama-3-70b, 30K tokens), the
                         saving size too by ranks of their own, every store with the first one's
                         drive tunings (TP_SAME_TUNING=0: its own); TP_PASSES=P (1): every store
                         kept and read again in P-1 more rounds over all of them, the stores and
                         the restoring sizes in reverse order every other pass; then an MLA store
                         (deepseek-v3) saved at TP 8 and restored at TP 8, 1, 2 (TP_MLA=0: not)
  coded [N [SEED ARGS]]  coded records (issue 28) over N fast drives (1): a TP-free store of
                         bf16-like synthetic KV (--kv bf16-like; not a model's KV), or with
                         KV=file:.kvdata/<f>.bin forward-pass KV (KV=forward: made there by
                         bench/codec/forward_kv.py, 4 layers x 4,096 tokens), restored raw and coded
                         (--compress split16, decoded on the GPU) into GPU memory, fio next to each;
                         the note gives KV delivered against the bytes fio reads from the drive a
                         second. With a KV file, first kvtier_codec_gpu_bench on it (split16 decoded
                         on the GPU against D2D and pinned H2D copies) and, where .whl/ holds nvCOMP
                         (fetch_nvcomp_wheels.sh), bench/codec/nvcomp_bench.py (nvCOMP's codecs)
                         CODECS (off split16), CODED_PATHS (posix,gds), CODEC_BENCH=0 (skip the
                         codecs alone), RUN_TAG (suffix of the runs' names); after each store,
                         destination_bench on its files at fio's best pattern into a plain buffer
                         and into the GPU (CODED_DEST=0: not)
  consumers [N [SEED ARGS]]
                         a store over N fast drives (8) at its tuning, written once, then restored
                         with each consumer-thread count of CONSUMERS in turn ("4 64 4 64";
                         64: one a staging slot), fio beside each
  lanes [N [SEED ARGS]]  raw records over N fast drives (8), posix into GPU memory: a TP-free store
                         at its tuning, with 1M x 44M, at TP 4, and a per-rank store at its tuning
                         and with 1M x 12M (KV=file:PATH or forward, else random)
  drives N [SEED ARGS]   a store over N fast drives: 4M x 1 per drive and rank (posix and gds),
                         16M x 1 per drive and rank, the defaults; e.g. `drives 8 --segment-size 256M`
  destination N [SEED ARGS]
                         a store over N fast drives at 4M x 1 per drive and rank, then
                         destination_bench (none of kvtier's code) on its segment files into a
                         plain buffer and pinned + copy to the GPU, then kvtier again
  fio-scaling [MAX]      fio alone on 1, 2, 4 .. MAX fast drives (default 4), 16M at depth 1 and 8
  peers-drives N         the peers and kvtier on N fast drives, fio next to each round: N = 1 one
                         drive holds every configuration's files; N > 1 kvtier's store spans all,
                         each peer's file for rank r sits on drive r; PEERS_KV=PATH: forward-pass
                         KV for all, and kvtier's coded records ("kvtier posix split16") beside them
  striped                the peers on one file system striped over four fast drives (device-mapper
                         RAID 0: needs dm-mod, which the H200 VM lacks)

Env: OUT (results, default /tmp/kvtier-out), TESTS=1, CTEST_ARGS (e.g. "-L gpu"), SESSIONS (seed runs on fast drives, 1),
BUDGET_S (the call's seconds, 540: later steps are skipped when it is nearly spent).
EOF
}

scenario=${1:-}
[ -n "$scenario" ] && shift
case "$scenario" in
  tests | verify | gpu-bench | seed | shared | reliability | peers | model | one-drive | drives | tuned | tp-change | coded | \
    destination | lanes | consumers | \
    fio-scaling | peers-drives | striped) ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  *)
    usage >&2
    exit 2
    ;;
esac

source "$here/h200_common.sh"
source "$here/fast_drives.sh"
K=build/h200/tools/kvtier/kvtier

# The seed workload on the virtio disk: `kvtier bench --workload seed ARGS` into /root/runs/NAME.
virtio_seed() {
  local name=$1 start
  shift
  rm -rf /root/seed-store
  start=$(date +%s)
  # shellcheck disable=SC2068
  stdbuf -oL "$K" bench --workload seed --store /root/seed-store --out "/root/runs/$name" "$@" 2>&1 \
    | grep -v "%$" > "$OUT/$name.txt"
  say "== $name (virtio disk: $*): $(( $(date +%s) - start )) s"
  grep -E "^\| |^SLOTS |fio ceiling|WARNING|ERROR" "$OUT/$name.txt" | tee -a "$OUT/summary.txt"
  rm -rf /root/seed-store
}

run_tests() {
  h200_tests 2>&1 | tee -a "$OUT/summary.txt"
  h200_udev_entry
  h200_gds_tests 2>&1 | tee -a "$OUT/summary.txt"
}

# dd of a store's segment files, one O_DIRECT 16 MiB reader per rank at once, page cache dropped.
dd_ceiling() {
  local root=$1 start end bytes r
  sync; echo 3 > /proc/sys/vm/drop_caches
  start=$(date +%s%N)
  for r in 0 1; do
    (find "$root" -path "*/rank$r*/seg-*.kvt" -exec dd if={} of=/dev/null bs=16M iflag=direct status=none \;) &
  done
  wait
  end=$(date +%s%N)
  bytes=$(find "$root" -path "*/rank*/seg-*.kvt" -printf "%s\n" | awk '{ s += $1 } END { print s + 0 }')
  (( bytes > 0 )) || { say "dd: no segment files under $root"; return 1; }
  say "dd (one reader per rank, 16M, O_DIRECT, whole segment files): $(python3 -c "import sys; b, ns = \
int(sys.argv[1]), int(sys.argv[2]); print(f'{b / 1e9:.2f} GB in {ns / 1e9:.3f} s = {b / ns:.2f} GB/s')" "$bytes" "$((end - start))")"
}

# GiB per fast drive for SESSIONS 100K-token sessions (9.83 GB over both ranks) spread over N.
drive_gib() { echo $(( (12 * ${SESSIONS:-1} + $1 - 1) / $1 + 4 )); }

# seed_store_roots ROOTS: the store the seed bench keeps under each of ROOTS (its seed-chunk256).
seed_store_roots() { tr ',' '\n' <<< "$1" | sed 's#$#/seed-chunk256#' | paste -sd,; }

# drive_spread NAME ROOTS [LS ARGS]: segments and bytes written per drive of the seed store under
# ROOTS (`kvtier ls`), into the summary: a store that leaves a drive idle shows here.
drive_spread() {
  local name=$1 roots
  roots=$(seed_store_roots "$2")
  shift 2
  if ! "$K" ls --store "$roots" "$@" > "$OUT/$name-ls.txt" 2>&1; then
    say "== $name: kvtier ls failed: $(tail -1 "$OUT/$name-ls.txt")"
    return 0
  fi
  say "== $name: segments per drive (drive:count/GB written): $(awk 'NR > 1 && $7 ~ /^[0-9]+$/ {
      n[$7]++; b[$7] += $3 } END { for (d in n) printf "%s:%d/%.2f\n", d, n[d], b[d] / 1e9 }' \
    "$OUT/$name-ls.txt" | sort -n | paste -sd' ')"
  # Two stores of one layout that restore at different rates: how their files lie on each drive.
  command -v filefrag > /dev/null || return 0
  local root d=0 spread=()
  for root in ${roots//,/ }; do
    spread+=("$d:$(find "$root" -name 'seg-*.kvt' -exec filefrag {} + 2> /dev/null \
      | awk '{ e += $(NF - 2) } END { printf "%d/%d", NR, e }')")
    d=$((d + 1))
  done
  say "== $name: segment files and their extents per drive (drive:files/extents): ${spread[*]}"
}

need_fio() { command -v fio > /dev/null || { say "no fio: bench/gpu/build_fio.sh makes .deps/fio"; exit 1; }; }

scenario_tests() { run_tests; }

scenario_verify() {
  run_tests
  virtio_seed virtio --sessions 1 --tokens 100000 --paths posix,gds,dram
  if h200_left 90; then scenario_shared --sessions 1 --repeat 3; else say "== shared: skipped (time)"; fi
}

scenario_gpu_bench() {
  local tokens=${1:-100000} repeats=${2:-3}
  h200_udev_entry
  mkdir -p /root/kvbench && rm -rf /root/kvbench/* /root/kvbench-dram
  say "== GPU path benchmark: $tokens tokens, $repeats repeats (cuFile in compat mode)"
  KVTIER_BENCH_GDS=1 stdbuf -oL build/h200/bench/kvtier_gpu_bench /root/kvbench "$OUT/gpu_bench.json" "$tokens" \
    "$repeats" 2>&1 | tee -a "$OUT/summary.txt"
  dd_ceiling /root/kvbench
  rm -rf /root/kvbench /root/kvbench-dram
}

scenario_seed() {
  h200_udev_entry
  virtio_seed seed "$@"
}

scenario_shared() {
  local cluster=/root/shared-cluster seeds start
  if ! command -v redis-server > /dev/null || ! command -v redis-cli > /dev/null; then
    say "shared: no redis-server/redis-cli (bench/gpu/fetch_debs.sh)"
    return 1
  fi
  bench/remote/stop_cluster.sh "$cluster"
  seeds=$(bench/remote/start_cluster.sh "$cluster" 7100 1 3) || { say "shared: no cluster"; return 1; }
  rm -rf /root/shared-store
  start=$(date +%s)
  (( $# )) || set -- --sessions 2 --repeat 3
  stdbuf -oL "$K" bench --workload shared --remote "$seeds" --device cuda --store /root/shared-store \
    --out /root/runs/shared "$@" 2>&1 | grep -v "%$" > "$OUT/shared.txt"
  say "== shared ($*): $(( $(date +%s) - start )) s"
  grep -E "^\| |WARNING|ERROR" "$OUT/shared.txt" | tee -a "$OUT/summary.txt"
  redis-cli -p 7100 info memory | grep -E "used_memory_human|maxmemory_human" >> "$OUT/summary.txt"
  bench/remote/stop_cluster.sh "$cluster"
  rm -rf /root/shared-store
}

scenario_reliability() {
  local start
  export KVTIER_TEST_SEED="${KVTIER_TEST_SEED:-$(date +%s)}"
  say "seed: $KVTIER_TEST_SEED"
  h200_udev_entry
  # Most telling first: a call cut short by its time limit keeps what matters.
  say "== GPU tests with the udev entry (cuFile compat mode), the property test left to the next step"
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=used CUFILE_LOGFILE_PATH="$OUT/cufile.log" timeout 120 \
    build/h200/tests/kvtier_gpu_tests --gtest_filter=-GpuPropertyTest.* > "$OUT/gpu_tests_gds.log" 2>&1
  grep -E "gds:|FAILED|PASSED|Failure" -A3 "$OUT/gpu_tests_gds.log" | tail -12 | tee -a "$OUT/summary.txt"
  say "== wide property slice: ${PROPERTY_CASES:-500} cases up to ${PROPERTY_MAX_MB:-64} MiB, every path incl. cuFile"
  start=$(date +%s)
  KVTIER_TEST_DIR=/root KVTIER_PROPERTY_CASES="${PROPERTY_CASES:-500}" KVTIER_PROPERTY_MAX_MB="${PROPERTY_MAX_MB:-64}" \
    timeout 220 build/h200/tests/kvtier_gpu_tests --gtest_filter=GpuPropertyTest.* > "$OUT/property_wide.log" 2>&1
  say "rc $?, $(( $(date +%s) - start )) s"
  grep -E "KVTIER_TEST_SEED|cases run|FAILED|PASSED|Failure|replay" "$OUT/property_wide.log" | head -20 \
    | tee -a "$OUT/summary.txt"
  say "== PyTorch on the GPU (the reported geometries), cuFile compat mode"
  h200_python_env
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=used timeout 120 python3 tests/python/test_torch.py -v \
    > "$OUT/torch.log" 2>&1
  tail -6 "$OUT/torch.log" | tee -a "$OUT/summary.txt"
  rm -f "/run/udev/data/b$(mountpoint -d /)"
  say "== GPU tests, no udev entry (cuFile refuses the files: GDS falls back and says why)"
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=fallback timeout 150 ctest --test-dir build/h200 -L gpu -LE python \
    --output-on-failure > "$OUT/ctest_gpu.log" 2>&1
  grep -E "tests passed|Failed|\(Failed\)|\*\*\*" "$OUT/ctest_gpu.log" | tail -12 | tee -a "$OUT/summary.txt"
}

scenario_peers() {
  local start
  h200_udev_entry
  h200_python_env
  rm -rf /root/peers
  start=$(date +%s)
  python3 bench/peers/peers_bench.py --dir /root/peers --out "$OUT/peers" "$@" > "$OUT/peers.txt" 2>&1
  say "== peers (virtio disk: $*): rc $? in $(( $(date +%s) - start )) s"
  cat "$OUT/peers/table.md" 2>/dev/null | tee -a "$OUT/summary.txt"
  rm -rf /root/peers
}

scenario_model() {
  local start
  h200_udev_entry
  h200_python_env
  rm -rf /root/model-store
  start=$(date +%s)
  timeout "${MODEL_TIMEOUT:-300}" python3 bench/model/restore_vs_recompute.py --store /root/model-store \
    --out "$OUT/model" "$@" 2>&1 | grep -v "^W1203" > "$OUT/model.txt"
  say "== model ($*): $(( $(date +%s) - start )) s"
  cat "$OUT/model/table.md" 2>/dev/null | tee -a "$OUT/summary.txt"
  rm -rf /root/model-store
}

# One store on one drive, written by the first run and read by the others (--keep).
scenario_one_drive() {
  need_fio
  make_fast_drives 1 "$(drive_gib 1)" | tee -a "$OUT/summary.txt" || return 1
  h200_seed one-4M-x1 /mnt/fast0/s --paths posix,gds --request-size 4M --staging 4M
  dd_ceiling /mnt/fast0/s
  h200_seed one-8M-x1 /mnt/fast0/s --paths posix --request-size 8M --staging 8M
  h200_seed one-16M-x1 /mnt/fast0/s --paths posix --request-size 16M --staging 16M
  h200_seed one-16M-x2 /mnt/fast0/s --paths posix --request-size 16M --staging 32M
  h200_seed one-16M-x32 /mnt/fast0/s --paths posix --request-size 16M --staging 512M
  h200_seed one-default /mnt/fast0/s --paths posix
  h200_seed one-4M-x1-again /mnt/fast0/s --paths posix --request-size 4M --staging 4M
}

# A store over N drives, written by the first run and read by the others (--keep); staging of one
# request per drive and rank.
scenario_drives() {
  local n=${1:?drives N}
  shift
  need_fio
  make_fast_drives "$n" "$(drive_gib "$n")" | tee -a "$OUT/summary.txt" || return 1
  local roots
  roots=$(fast_drive_list "$n" m)
  h200_seed "drives$n-4M-x1" "$roots" --paths posix,gds --request-size 4M --staging $(( 4 * n ))M "$@"
  h200_seed "drives$n-16M-x1" "$roots" --paths posix --request-size 16M --staging $(( 16 * n ))M "$@"
  h200_seed "drives$n-default" "$roots" --paths posix "$@"
  du -sh /mnt/fast*/m 2> /dev/null | tee -a "$OUT/summary.txt"
}

# Fast by default (issue 26): a store over N drives at kvtier's defaults, no size given, against
# fio's best request size and depth (--fio-requests). The first run writes the store; the engines
# opened for its repeat phase, or else the second run's, probe each drive and read with what they
# found; `kvtier stat` shows it per drive.
# destination_ceiling NAME DIR REQUEST DEPTH: destination_bench (liburing + CUDA, none of kvtier's
# code) over the segment files of the store under /mnt/fast*/DIR, two readers per drive (the
# ranks' streams), into a plain buffer and into pinned memory copied on to the GPU, alternating: on
# RAM-backed drives the second is what any bounce-path reader can reach (every byte crosses host
# memory three times, twice for fio).
destination_ceiling() {
  local name=$1 dir=$2 request=$3 depth=$4 d r dest files readers=()
  for d in /mnt/fast*/"$dir"; do
    for r in 0 1; do
      files=$(find "$d" -name 'seg-*.kvt' 2> /dev/null | sort | awk -v r="$r" 'NR % 2 == r' | paste -sd,)
      [ -n "$files" ] && readers+=(--rank "$files")
    done
  done
  (( ${#readers[@]} )) || { say "$name: no segment files under /mnt/fast*/$dir"; return 0; }
  for dest in plain pinned+h2d pinned+h2d plain; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    say "$name: $dest, $request B x $depth, $(( ${#readers[@]} / 2 )) readers: $(build/h200/bench/kvtier_destination_bench \
      --request "$request" --depth "$depth" --dest "$dest" "${readers[@]}")"
  done
}

# destination_at_fio_best NAME DIR LOG: destination_ceiling at the best pattern of the first fio
# sweep in a seed run's LOG (none there: nothing).
destination_at_fio_best() {
  local best
  best=$(grep -m1 -o -- '-> [0-9.]* MB at depth [0-9]*' "$3" | awk '{ print $2, $6 }')
  [ -n "$best" ] || return 0
  destination_ceiling "$1" "$2" \
    "$(python3 -c "import sys; print(round(float(sys.argv[1]) * 1e6 / 2**20) * 2**20)" "${best% *}")" "${best#* }"
}

scenario_tuned() {
  local n=${1:?tuned N}
  shift
  need_fio
  make_fast_drives "$n" "$(drive_gib "$n")" | tee -a "$OUT/summary.txt" || return 1
  local roots r
  roots=$(fast_drive_list "$n" t)
  local paths=${TUNED_PATHS:-posix,gds}
  h200_seed "tuned$n-first" "$roots" --paths "$paths" --fio-requests 1M,2M,4M,8M,16M "$@"
  destination_at_fio_best "tuned$n-destination" t "$OUT/tuned$n-first.txt"
  # The same store with the two ranks sharing the tuning (each half of it, whole requests, two at
  # least), as they did before each took the whole (TUNED_SHARED=0: not run): the sizes the first
  # run's line names, given as flags.
  local line request staging shared_flags=()
  line=$(grep -m1 -o "requests of [0-9.]* [MG]B and staging [0-9.]* [MG]B per rank (tuned" "$OUT/tuned$n-first.txt")
  if [ "${TUNED_SHARED:-1}" != 0 ] && [ -z "$line" ]; then
    say "tuned$n-shared: skipped (the first run's line names no tuned sizes)"
  elif [ "${TUNED_SHARED:-1}" != 0 ]; then
    read -r request staging < <(python3 -c "
import re, sys
req, stg = (round(float(v) * (1e9 if u == 'G' else 1e6) / 2**20)
            for v, u in re.findall(r'([0-9.]+) ([MG])B', sys.argv[1]))
print(req, max(2, -(-stg // (2 * req))) * req)" "$line")
    say "tuned$n-shared: each rank with half the tuning: --request-size ${request}M --staging ${staging}M"
    shared_flags=(--paths posix --request-size "${request}M" --staging "${staging}M" --fio-requests 1M,2M,4M,8M,16M)
    h200_seed "tuned$n-shared" "$roots" "${shared_flags[@]}" "$@"
  fi
  h200_seed "tuned$n-again" "$roots" --paths "$paths" --fio-requests 1M,2M,4M,8M,16M "$@"
  # TUNED_SHARED=2: the shared tuning once more, so that the two alternate (defaults, shared,
  # defaults, shared) and a drift of the machine between windows shows.
  if [ "${TUNED_SHARED:-1}" = 2 ] && (( ${#shared_flags[@]} )); then
    h200_seed "tuned$n-shared-again" "$roots" "${shared_flags[@]}" "$@"
  fi
  # Sessions restored at once (issue 26: 8 at >= 0.9x of fio's aggregate, p99/p50 <= 1.2), 25K
  # tokens each so that eight fit the RAM-backed drives (TUNED_CONCURRENT=0: not run).
  if (( n > 1 )) && [ "${TUNED_CONCURRENT:-1}" = 1 ]; then
    SESSIONS=8 TOKENS=25000 h200_seed "tuned$n-concurrent" "$(fast_drive_list "$n" tc)" --paths posix \
      --concurrency 1,2,4,8 --fio-requests 1M,4M,16M
  fi
  roots=$(seed_store_roots "$roots")
  for r in 0 1; do
    "$K" stat --store "$roots" --tp-world 2 --tp-rank "$r" --json > "$OUT/tuned$n-stat-rank$r.json" 2>&1
    grep -E '"(io_request_bytes|staging_bytes|io_settings_from|request_bytes|in_flight|state)"' \
      "$OUT/tuned$n-stat-rank$r.json" | tr -s ' ' | paste -sd' ' | tee -a "$OUT/summary.txt"
  done
}

# Any TP size (issue 27): TP-free stores over N fast drives, saved by ranks of each TP size and
# restored by ranks of every TP size into GPU memory (rows "posix TP A->B"; A->A, ranks of the
# saving size started afresh as every other size is, is the same-TP restore each TP change is held
# against): llama-3-70b (8 KV heads; 30K tokens, 9.8 GB), then deepseek-v3's MLA latent (stored
# once, read whole by every rank; 50K tokens, 3.5 GB per rank).
scenario_tp_change() {
  local n=${1:-4} a roots pass gib order=${TP_RESTORED:-1,2,4,8} passes=${TP_PASSES:-1}
  local saved=(${TP_SAVED:-2 8 1 4})
  shift
  need_fio
  # More than one pass keeps every store to the end, its passes taken in rounds over all stores:
  # two stores of one layout read in different windows differ by more than a TP change (runs 5-7),
  # so A->B and B->B are read in the same rounds.
  gib=$(drive_gib "$n")
  (( passes > 1 )) && gib=$(( (10 * ${SESSIONS:-1} * ${#saved[@]} + n - 1) / n + 2 ))
  make_fast_drives "$n" "$gib" | tee -a "$OUT/summary.txt" || return 1
  # Every store reads with the first one's drive tunings (TP_SAME_TUNING=0: each probes its own):
  # the probe's pick differs between identical stores, and what is measured is the TP change.
  local tunings=/root/tp-tunings d
  rm -rf "$tunings"
  for a in "${saved[@]}"; do
    roots=$(fast_drive_list "$n" "tp$a")
    if [ "${TP_SAME_TUNING:-1}" = 1 ] && [ -d "$tunings" ]; then
      for ((d = 0; d < n; d++)); do
        mkdir -p "/mnt/fast$d/tp$a" && tar -C "$tunings/$d" -cf - . | tar -C "/mnt/fast$d/tp$a" -xf -
      done
      say "tp-saved$a: the drives' tunings of the first store: $(cat "$tunings"/0/*/kvtier2/*/TUNING.json | tr -d '\n ')"
    fi
    TOKENS=30000 h200_seed "tp-saved$a" "$roots" --model llama-3-70b --store-format 2 --ranks "$a" \
      --restore-ranks "$order" --paths posix "$@"
    drive_spread "tp-saved$a" "$roots" --model llama-3-70b --store-format 2
    if [ ! -d "$tunings" ]; then
      for ((d = 0; d < n; d++)); do
        mkdir -p "$tunings/$d"
        (cd "/mnt/fast$d/tp$a" && find . -path '*/kvtier2/*/TUNING.json' | tar -cf - -T -) | tar -C "$tunings/$d" -xf -
      done
    fi
    (( passes > 1 )) || rm -rf /mnt/fast*/"tp$a"
  done
  # Each later pass saves every store again as it is (nothing new to write) and restores it again.
  # The store read first in a round reads slower on these drives (runs 7-9), so every other round
  # takes the stores the other way round, as it does the restoring sizes.
  local round
  for ((pass = 2; pass <= passes; pass++)); do
    order=$(tr ',' '\n' <<< "$order" | tac | paste -sd,)
    round=("${saved[@]}")
    (( pass % 2 == 0 )) && mapfile -t round < <(printf '%s\n' "${saved[@]}" | tac)
    for a in "${round[@]}"; do
      TOKENS=30000 h200_seed "tp-saved$a-pass$pass" "$(fast_drive_list "$n" "tp$a")" --model llama-3-70b \
        --store-format 2 --ranks "$a" --restore-ranks "$order" --paths posix "$@"
    done
  done
  for a in "${saved[@]}"; do rm -rf /mnt/fast*/"tp$a"; done
  [ "${TP_MLA:-1}" = 0 ] && return
  roots=$(fast_drive_list "$n" mla)
  TOKENS=50000 h200_seed "mla-saved8" "$roots" --model deepseek-v3 --store-format 2 --ranks 8 --restore-ranks 1,2 \
    --paths posix "$@"
  du -sh /mnt/fast*/mla 2> /dev/null | tee -a "$OUT/summary.txt"
  rm -rf /mnt/fast*/mla
}

scenario_destination() {
  local n=${1:?destination N} roots
  shift
  need_fio
  make_fast_drives "$n" "$(drive_gib "$n")" | tee -a "$OUT/summary.txt" || return 1
  roots=$(fast_drive_list "$n" m)
  h200_seed "dest$n-4M-x1" "$roots" --paths posix --request-size 4M --staging $(( 4 * n ))M "$@"
  # Each destination twice, in alternating order; one drive also at 16 MiB x 8 (kvtier's defaults).
  destination_ceiling "dest$n" m 4194304 1
  (( n == 1 )) && destination_ceiling "dest$n" m 16777216 8
  h200_seed "dest$n-4M-x1-again" "$roots" --paths posix --request-size 4M --staging $(( 4 * n ))M "$@"
}

scenario_fio_scaling() {
  local max=${1:-4} n d i files
  need_fio
  make_fast_drives "$max" 6 | tee -a "$OUT/summary.txt" || return 1
  for ((n = 1; n <= max; n *= 2)); do
    for d in 1 8; do
      files=()
      for ((i = 0; i < n; i++)); do files+=(--name="d$i" --filename="/mnt/fast$i/fio.dat"); done
      fio --ioengine=io_uring --direct=1 --rw=read --bs=16M --iodepth="$d" --size=4G --group_reporting \
        --output-format=json "${files[@]}" > "$OUT/fio-alone-$n-$d.json" 2>&1
      say "fio alone: $n drive(s), depth $d, 16M: $(python3 -c "import json, sys; t = open(sys.argv[1]).read(); \
print(f'{json.loads(t[t.find(\"{\"):])[\"jobs\"][0][\"read\"][\"bw_bytes\"] / 1e9:.2f} GB/s')" "$OUT/fio-alone-$n-$d.json")"
    done
  done
}

# peers_bench.py on PEERS_DIR with ARGS, its table into the summary.
peers_on() {
  local what=$1 dir=$2 start
  shift 2
  start=$(date +%s)
  timeout $(( ${BUDGET_S:-540} - 30 - ($(date +%s) - H200_T0) )) python3 bench/peers/peers_bench.py --dir "$dir" \
    --out "$OUT/peers" --repeats 2 "$@" > "$OUT/peers.log" 2>&1
  say "== peers ($what): rc $? in $(( $(date +%s) - start )) s"
  grep -E '^\{"config"|fio depth|Error|error' "$OUT/peers.log" > "$OUT/peers-rows.txt"
  cat "$OUT/peers/table.md" 2> /dev/null | tee -a "$OUT/summary.txt"
}

scenario_peers_drives() {
  local n=${1:?peers-drives N} kv=()
  need_fio
  h200_python_env
  # PEERS_KV=PATH: forward-pass KV (bench/codec/forward_kv.py) for every configuration, and the
  # coded one beside kvtier's raw records.
  [ -n "${PEERS_KV:-}" ] && kv=(--kv "$PEERS_KV")
  if (( n == 1 )); then
    make_fast_drives 1 46 | tee -a "$OUT/summary.txt" || return 1
    peers_on "one drive, kvtier at 4M x 1" /mnt/fast0/peers --request-size 4M --staging 4M "${kv[@]}" \
      --configs "kvtier posix${kv:+,kvtier posix split16},kvikio compat,kvikio cufile,naive torch,lmcache disk,lmcache gds"
  else
    make_fast_drives "$n" $(( 48 / n + 2 )) | tee -a "$OUT/summary.txt" || return 1
    peers_on "$n drives; kvtier's store over all, 4M x 1 per drive and rank" /mnt/fast0/peers \
      --drives "$(fast_drive_list "$n" .)" --request-size 4M --staging $(( 4 * n ))M "${kv[@]}" \
      --configs "kvtier posix${kv:+,kvtier posix split16},kvikio compat,kvikio cufile,naive torch,lmcache disk"
  fi
}

scenario_striped() {
  # dmsetup: from the image, or unpacked from a .deb in .deps (dmsetup, libdevmapper1.02.1)
  export PATH="/tmp/deps/sbin:$PATH" LD_LIBRARY_PATH="/tmp/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  need_fio
  h200_python_env
  drop_striped_drive 2> /dev/null
  make_striped_drive 4 12 2>&1 | tee -a "$OUT/summary.txt"
  (( PIPESTATUS[0] == 0 )) || return 1
  peers_on "4 drives striped, kvtier at 4M x 2" /mnt/stripe/peers --request-size 4M --staging 8M \
    --configs "kvtier posix,kvikio compat,kvikio cufile,naive torch,lmcache disk,lmcache gds"
  drop_striped_drive
}

# The codecs alone on a file of KV, before any drive: split16's GPU decode against a D2D copy and
# pinned H2D copies of the raw and the coded bytes, then nvCOMP's codecs where .whl/ holds its
# wheels (bench/gpu/fetch_nvcomp_wheels.sh). Each under a timeout; a failure is said, not fatal.
codec_gpu_benches() {
  local kv=$1 rc
  timeout 90 build/h200/bench/kvtier_codec_gpu_bench "$kv" > "$OUT/codec_gpu_bench.txt" 2>&1
  rc=$?
  say "== split16 on the GPU (kvtier_codec_gpu_bench $kv): rc $rc"
  grep '^{' "$OUT/codec_gpu_bench.txt" | tee -a "$OUT/summary.txt"
  (( rc == 0 )) || grep -v '^{' "$OUT/codec_gpu_bench.txt" | tail -3 | tee -a "$OUT/summary.txt"
  if ! ls .whl/nvidia_nvcomp_cu13-*.whl > /dev/null 2>&1; then
    say "== nvCOMP: skipped (no nvidia_nvcomp_cu13 wheel in .whl/: bench/gpu/fetch_nvcomp_wheels.sh)"
    return
  fi
  # The store's runs after it are the scenario's measure: they keep their time.
  h200_left 240 || { say "== nvCOMP: skipped (time)"; return; }
  h200_python_env
  timeout 120 python3 bench/codec/nvcomp_bench.py "$kv" > "$OUT/nvcomp_bench.txt" 2>&1
  rc=$?
  say "== nvCOMP (bench/codec/nvcomp_bench.py $kv): rc $rc"
  # One short line per algorithm; the whole lines stay in nvcomp_bench.txt.
  python3 -c "import json, sys
for l in sys.stdin:
    if l.startswith('{'):
        j = json.loads(l)
        print(json.dumps({k: j[k] for k in ('algorithm', 'ratio', 'decode_GBps', 'byte_exact', 'error', 'gpu') if k in j}))" \
    < "$OUT/nvcomp_bench.txt" | tee -a "$OUT/summary.txt"
  (( rc == 0 )) || grep -v '^{' "$OUT/nvcomp_bench.txt" | tail -3 | tee -a "$OUT/summary.txt"
}

# KV=forward: the forward-pass KV made here, on the GPU (the image has torch and transformers), and
# KV set to its file.
forward_kv_if_asked() {
  [ "${KV:-}" = forward ] || return 0
  python3 bench/codec/forward_kv.py --out /root/kvdata --layers 4 --tokens 4096 --experts 16 \
    > "$OUT/forward_kv.log" 2>&1 || { tail -5 "$OUT/forward_kv.log"; return 1; }
  say "forward-pass KV: $(tail -1 "$OUT/forward_kv.log")"
  KV=file:/root/kvdata/kv-4L-4096T.bin
}

# Coded records (issue 28): the same TP-free store raw and coded, posix and gds into GPU memory,
# coded records decoded on the GPU (the measure to beat: KV delivered at >= 1.2x of the bytes fio
# reads from the drive a second). KV=file:PATH takes forward-pass KV (bench/codec/forward_kv.py,
# carried under .kvdata/), KV=forward makes it on the machine, instead of bf16-like synthetic KV;
# with a file the codecs are measured alone on it first (codec_gpu_benches; synthetic KV has no
# file, so there they are skipped).
scenario_coded() {
  local n=${1:-1} c roots
  shift
  need_fio
  forward_kv_if_asked || return 1
  case "${KV:-}:${CODEC_BENCH:-1}" in
    file:*:1) codec_gpu_benches "${KV#file:}" ;;
    file:*) say "== codec GPU benches: skipped (CODEC_BENCH=0)" ;;
    *) say "== codec GPU benches: skipped (synthetic KV: no file; KV=forward or KV=file:PATH)" ;;
  esac
  make_fast_drives "$n" "$(drive_gib "$n")" | tee -a "$OUT/summary.txt" || return 1
  for c in ${CODECS:-off split16}; do
    roots=$(fast_drive_list "$n" "coded-$c")
    h200_seed "coded$n-$c${RUN_TAG:-}" "$roots" --store-format 2 --kv "${KV:-bf16-like}" --compress "$c" \
      --paths "${CODED_PATHS:-posix,gds}" "$@"
    drive_spread "coded$n-$c${RUN_TAG:-}" "$roots" --model qwen3-coder-30b-a3b --store-format 2
    # What any bounce-path reader delivers from these files into the GPU (CODED_DEST=0: not).
    [ "${CODED_DEST:-1}" = 1 ] &&
      destination_at_fio_best "coded$n-$c${RUN_TAG:-}-destination" "coded-$c" "$OUT/coded$n-$c${RUN_TAG:-}.txt"
    rm -rf /mnt/fast*/"coded-$c"
  done
}

# What holds a TP-free store's restore over N fast drives under a per-rank store's (issue 28's
# eight-drive gap): raw records of the same KV (KV=file:PATH, else random), posix into GPU memory,
# each store saved and restored alone. The TP-free store at its tuning and with twice the staging
# (each head-group store then has two or more slots per drive lane), at TP 4 (one head-group store
# per rank, the rank's whole staging), and a per-rank store at its tuning and with the staging a
# TP-free head-group store gets (the reverse).
scenario_lanes() {
  local n=${1:-8} roots
  shift
  need_fio
  forward_kv_if_asked || return 1
  local kv=${KV:-random}
  make_fast_drives "$n" "$(drive_gib "$n")" | tee -a "$OUT/summary.txt" || return 1
  lane_run() {
    local name=$1
    shift
    roots=$(fast_drive_list "$n" "$name")
    h200_seed "lanes$n-$name" "$roots" --kv "$kv" --paths posix "$@"
    rm -rf /mnt/fast*/"$name"
  }
  lane_run free-tuned --store-format 2 "$@"
  lane_run free-44M --store-format 2 --request-size 1M --staging 44M "$@"
  lane_run free-tp4 --store-format 2 --ranks 4 "$@"
  lane_run rank-tuned --store-format 1 "$@"
  lane_run rank-12M --store-format 1 --request-size 1M --staging 12M "$@"
}

# The consumer-thread count against itself on one store: a store over N fast drives (8) written
# at its tuning, then restored with each count of CONSUMERS in turn ("default": kvtier's own, one
# a staging slot, as 64 gives too; default list "4 64 4 64": alternating, so that a drift of the
# machine between windows shows), fio beside each.
scenario_consumers() {
  local n=${1:-8} c i=0 roots
  shift
  need_fio
  make_fast_drives "$n" "$(drive_gib "$n")" | tee -a "$OUT/summary.txt" || return 1
  roots=$(fast_drive_list "$n" t)
  h200_seed "consumers$n-write" "$roots" --paths posix --fio-requests 1M "$@"
  for c in ${CONSUMERS:-4 64 4 64}; do
    i=$(( i + 1 ))
    say "consumers$n-$i: KVTIER_CONSUMER_THREADS=$c"
    (
      if [ "$c" = default ]; then unset KVTIER_CONSUMER_THREADS; else export KVTIER_CONSUMER_THREADS=$c; fi
      h200_seed "consumers$n-$i-$c" "$roots" --paths posix --fio-requests 1M "$@"
    )
  done
}

h200_results "h200-$scenario"
say "scenario: $scenario $*"
h200_machine
command -v redis-server > /dev/null && h200_with_redis
h200_build || exit 1
if [ "${TESTS:-}" = 1 ] && [ "$scenario" != tests ] && [ "$scenario" != verify ]; then run_tests; fi
drop_fast_drives 2> /dev/null
case "$scenario" in
  one-drive | drives | tuned | tp-change | coded | lanes | consumers | destination | fio-scaling | peers-drives | striped)
    say "LABEL: $FAST_DRIVE_LABEL" ;;
esac
"scenario_${scenario//-/_}" "$@"
rc=$?
drop_fast_drives 2> /dev/null
say "total: $(( $(date +%s) - H200_T0 )) s, rc $rc"
exit "$rc"
