#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The kvtier CLI with good and bad input: right exit codes and a message naming the problem.
# Usage: cli_test.sh <path to kvtier> [<path to kvtier_test_helper>]
set -u
kvtier="$1"
helper="${2:-}"
work=$(mktemp -d "${KVTIER_TEST_DIR:-/tmp}/kvtier-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# expect <exit code> <text expected in output> <args...>
expect() {
  local want_rc="$1" want_text="$2"
  shift 2
  local out rc
  # The timeout turns a run that would never end (e.g. a count read as 2^64-1) into a failure.
  out=$(timeout "${KVTIER_CLI_TIMEOUT:-300}" "$kvtier" "$@" 2>&1 </dev/null)
  rc=$?
  if [[ $rc -eq $want_rc && "$out" == *"$want_text"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL: kvtier $* -> rc $rc (want $want_rc), output:"
    echo "$out" | head -5
    echo "  (wanted text: $want_text)"
  fi
}

s="$work/store"
common=(--store "$s" --model tiny --segment-size 8M --capacity 256M)
# ls, stat and verify take no flag that only matters when writing (--capacity, --segment-size, ...).
readers=(--store "$s" --model tiny)
expect 0 "chunks written=4" put "${common[@]}" --tokens 1000
expect 0 "restored 1000/1000" get "${common[@]}" --tokens 1000
expect 0 "chunks written=0 present=4" put "${common[@]}" --tokens 1000
expect 0 "restored 1000/1000" get "${common[@]}" --tokens 1000 --io dram --dram 64M
expect 0 "restored 1000/1000" get "${common[@]}" --tokens 1000 --io posix
expect 1 "restored 0/1000" get "${common[@]}" --tokens 1000 --seed 99
# A TP-free store (format 2) beside it: its own directory, found by --model; a record per chunk
# and head group (tiny has two KV heads: two groups).
tpfree=(--store "$s" --model tiny --store-format 2 --segment-size 8M --capacity 256M)
expect 0 "chunks written=8" put "${tpfree[@]}" --tokens 1000 --seed 5
expect 0 "restored 1000/1000" get "${tpfree[@]}" --tokens 1000 --seed 5
expect 1 "restored 0/1000" get "${tpfree[@]}" --tokens 1000 --seed 6
# Each TP-2 rank restores its head of what TP 1 saved, every byte checked (the generator's bytes for
# a head do not depend on the TP size holding it), and MLA's latent is written once for every rank.
expect 0 "restored 1000/1000" get "${tpfree[@]}" --tokens 1000 --seed 5 --tp-world 2 --tp-rank 1
mla=(--store "$s" --model deepseek-v3 --store-format 2 --segment-size 128M --capacity 1G --tokens 600)
expect 0 "chunks written=3" put "${mla[@]}" --tp-world 4 --tp-rank 0
expect 0 "chunks written=0 present=0" put "${mla[@]}" --tp-world 8 --tp-rank 5  # a follower writes nothing
expect 0 "restored 600/600" get "${mla[@]}" --tp-world 2 --tp-rank 1
expect 2 "is an MLA model: its latent, which every rank holds, is kept once by a TP-free store; add --store-format 2" \
  put --store "$s" --model deepseek-v3 --tokens 600
expect 2 "needs --model" get --store "$s" --store-format 2 --tokens 1000
expect 2 "--store-format" get "${common[@]}" --store-format 3 --tokens 1000
# The remote tier: credentials never in the URI; only put and get take it; an unreachable cluster
# leaves get local-only (built without hiredis, --remote is refused as not supported).
expect 2 "no credentials in the URI" get "${common[@]}" --tokens 1000 --remote redis://u:pw@127.0.0.1:1
expect 2 "--remote" ls "${readers[@]}" --remote redis://127.0.0.1:1
if "$kvtier" --version | grep -q "Redis: yes"; then
  expect 0 "restored 1000/1000" get "${common[@]}" --tokens 1000 --remote redis://127.0.0.1:1
else
  expect 2 "built without hiredis" get "${common[@]}" --tokens 1000 --remote redis://127.0.0.1:1
fi
expect 0 "verified 4 records" verify "${readers[@]}"
expect 0 "records" stat "${readers[@]}"
expect 0 '"records": 4' stat "${readers[@]}" --json
expect 0 "segment" ls "${readers[@]}"
# tune: too little data to probe (1 MB), then 20 MB on another store: probed, kept, shown by stat
# and used by the next command; explicit sizes are not tune's to take.
expect 3 "no drive could be tuned" tune "${readers[@]}"
expect 0 '"io_settings_from": "defaults"' stat "${readers[@]}" --json
t="$work/tuned"
expect 0 "chunks written=80" put --store "$t" --model tiny --capacity 256M --tokens 20480
expect 0 "in flight" tune --store "$t"
expect 0 '"state": "kept"' stat --store "$t" --json
expect 0 '"io_settings_from": "tuned"' stat --store "$t" --json
expect 0 "restored 20480/20480" get --store "$t" --tokens 20480
expect 2 "--request-size" tune --store "$t" --request-size 1M
# stat --prometheus: the text exposition, every sample line well formed and labelled with the store.
expect 0 "kvtier_records{store=\"$s/rank0of1\"} 4" stat "${readers[@]}" --prometheus
out=$("$kvtier" stat "${readers[@]}" --prometheus 2>/dev/null)
sample='^kvtier_[a-z_]+(\{store="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$'
if [[ $(grep -c . <<<"$out") -gt 40 && -z $(grep -v '^# \(HELP\|TYPE\) kvtier_' <<<"$out" | grep -Ev "$sample") ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: stat --prometheus is not the text format:"; echo "$out" | head -5
fi
expect 2 "excludes" stat "${readers[@]}" --prometheus --json

# A store over three directories (one per drive), listed in any order; a drive left out: misses.
m=(--model tiny --segment-size 8M --capacity 64M)
expect 0 "chunks written=" put --store "$work/d1,$work/d2,$work/d3" "${m[@]}" --tokens 20000 --sessions 3
expect 0 '"drives": 3' stat --store "$work/d3,$work/d1,$work/d2" --model tiny --json
# ls names each segment's drive: eight segments reach all three, the home drive (d1) among them.
for d in d1 d2 d3; do expect 0 "$work/$d/rank0of1" ls --store "$work/d3,$work/d1,$work/d2" --model tiny; done
expect 0 "restored 20000/20000" get --store "$work/d2,$work/d3,$work/d1" "${m[@]}" --tokens 20000 --sessions 3
expect 0 '"drives_offline": 1' stat --store "$work/d1,$work/d3" --model tiny --json
expect 2 "an empty directory in the list" get --store "$work/d1,,$work/d2" "${m[@]}" --tokens 10
expect 2 "not among the directories given" get --store "$work/d2" "${m[@]}" --tokens 10
# One directory listed twice, however it is spelled, is refused before anything is written.
mkdir -p "$work/dup" && ln -s "$work/dup" "$work/dup-link"
expect 2 "listed twice" put --store "$work/dup,$work/dup/" "${m[@]}" --tokens 10
expect 2 "listed twice" put --store "$work/d9,$work/dup,$work/dup-link" "${m[@]}" --tokens 10

# A miss or a short restore says why on stderr, naming the store.
expect 1 "not found: no stored prefix of these tokens in $s/rank0of1" get "${common[@]}" --tokens 1000 --seed 99
expect 1 "partial: the store holds the first 1000 of these 1500 tokens" get "${common[@]}" --tokens 1500
# --io gds cannot apply to the CLI's host-memory KV (nor without a GPU): said once by the engine,
# shown in stat's io_fallback, and the command still works.
out=$("$kvtier" get "${common[@]}" --tokens 1000 --io gds 2>&1)
if [[ $? -eq 0 && $(grep -c "I/O path gds: .*GPUDirect Storage" <<<"$out") -eq 1 ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: --io gds not said exactly once: $out"
fi
if [[ $(nvidia-smi -L 2>/dev/null | grep -c GPU) -eq 0 ]]; then
  expect 0 '"io_fallback": "I/O path gds: no CUDA device' stat "${readers[@]}" --io gds --json
fi
# Progress on stderr and results on stdout reach a pipe line by line, in order (stdout was
# block-buffered: every result line came at exit), with the total time next to the I/O time.
out=$("$kvtier" put --store "$work/progress" --model tiny --tokens 1000 --sessions 2 2>&1)
first_result=$(grep -n "^put seed=1 tokens=1000 .* in all$" <<<"$out" | cut -d: -f1)
second_start=$(grep -n "^put seed=2: making" <<<"$out" | cut -d: -f1)
if [[ -n "$first_result" && -n "$second_start" && $first_result -lt $second_start ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: put's progress and results out of order or missing:"; echo "$out"
fi
expect 0 "restoring up to" get --store "$work/progress" --model tiny --tokens 1000
expect 1 "s in all" get --store "$work/progress" --model tiny --tokens 1000 --seed 7

# --version prints the version CMakeLists.txt's project() gives.
version=$(sed -n 's/^project(kvtier VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
expect 0 "kvtier $version " --version

# Bad input: nonsense sizes, unknown models, wrong geometry, missing or unusable paths.
expect 2 "is not a decimal number" put --store "$s" --model tiny --tokens 10 --capacity lots
expect 2 "unknown unit" put --store "$s" --model tiny --tokens 10 --segment-size 12Q
expect 2 "unknown model preset" put --store "$s" --model gpt-17 --tokens 10
expect 2 "does not divide" put --store "$s" --model qwen3-coder-30b-a3b --tp-world 3 --tokens 10
expect 2 "--tokens: 0 is not a whole number in 1..2147483647" put "${common[@]}" --tokens 0
expect 3 "was created for" get --store "$s" --model tiny --chunk-tokens 128 --tokens 10
expect 3 "no store at" get --store "$work/missing" --model tiny --tokens 10
expect 3 "no store at" verify --store "$work/missing" --model tiny
touch "$work/file"
expect 2 "not a directory" put --store "$work/file" --model tiny --tokens 10
# A file where a store should be is named as such, not reported as a missing store.
expect 2 "not a directory: $work/file" ls --store "$work/file" --model tiny
expect 2 "not a directory: $work/file" get --store "$work/file/s" --model tiny --tokens 10
expect 2 "not a directory: $work/file" put --store "$work/file/s" --model tiny --tokens 10
# put and bench create the directories above their store, 0700 like the store's own.
expect 0 "chunks written=1" put --store "$work/new/a/b" --model tiny --tokens 100
if [[ $(stat -c %a "$work/new" "$work/new/a" "$work/new/a/b" | sort -u) == 700 ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: directories made for --store are not all 0700"
fi
expect 0 "byte-exact" bench --store "$work/new/bench/x" --model tiny --sessions 1 --tokens 1000 --repeat 1 --paths direct
# The readers refuse flags that cannot change what they do (a smaller --capacity would evict).
expect 2 "--capacity" ls "${readers[@]}" --capacity 256M
expect 2 "--segment-size" stat "${readers[@]}" --segment-size 8M
expect 2 "--tenant" verify "${readers[@]}" --tenant a
expect 2 "--io" ls "${readers[@]}" --io posix
expect 2 "--staging" stat "${readers[@]}" --staging 256M
expect 2 "--dram" verify "${readers[@]}" --dram 64M
expect 0 "verified 4 records" verify "${readers[@]}" --io buffered --request-size 1M --staging 4M
# A store keeps the capacity it was made with; another one asked for is said and kept.
k=(--store "$work/kept" --model tiny)
expect 0 "chunks written=1" put "${k[@]}" --tokens 100 --capacity 300M
expect 0 '"capacity_bytes": 314572800' stat "${k[@]}" --json
expect 0 "chunks written=0" put "${k[@]}" --tokens 100
expect 0 '"capacity_bytes": 314572800' stat "${k[@]}" --json
expect 0 "restored 100/100" get "${k[@]}" --tokens 100 --capacity 100M
expect 0 '"capacity_bytes": 314572800' stat "${k[@]}" --json
expect 0 "capacity changed from 314572800 to 209715200 bytes" put "${k[@]}" --tokens 100 --seed 2 --capacity 200M
expect 0 '"capacity_bytes": 209715200' stat "${k[@]}" --json
expect 0 "capacity_bytes     209715200" stat "${k[@]}"

# bench restores over what --paths names: --io and --dram would change nothing.
expect 2 "--io" bench --store "$work/b" --model tiny --io buffered
expect 2 "--dram" bench --store "$work/b" --model tiny --dram 64M
# --help shows the defaults, including those of options whose value 0 means "the default".
expect 0 "--store DIR=./kvtier-store" put --help
expect 0 "--capacity SIZE=64G" put --help
expect 0 "--segment-size SIZE=auto" get --help
expect 0 "--tp-world UINT:0..4294967295=1" ls --help
expect 0 "--io PATH=auto" verify --help
expect 0 "--tp-world UINT:0..4294967295=2" bench --help
expect 0 "--sessions UINT:1..100000=4" bench --help
expect 0 "--out TEXT=kvtier-seed-<time>" bench --help
expect 2 "--io sideways: expected auto" put "${common[@]}" --tokens 10 --io sideways
# Parse errors exit 2 (README), whatever CLI11's own code for them; --help still exits 0.
expect 2 "--bogus-flag" put "${common[@]}" --tokens 10 --bogus-flag
expect 2 "--tokens: 1 required" put "${common[@]}" --tokens
expect 2 "--tokens is required" put "${common[@]}"
expect 2 "ten" put "${common[@]}" --tokens ten
expect 2 "frobnicate" frobnicate --store "$s"
expect 2 "subcommand is required"
expect 0 "Usage" --help
expect 0 "--tokens" put --help
out=$("$kvtier" put "${common[@]}" --tokens 10 --bogus-flag 2>/dev/null)
if [[ -z "$out" ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: parse error on stdout: $out"; fi

# Numbers out of range, negatives above all (CLI11 reads -1 into an unsigned option as 2^64-1).
range="is not a whole number in"
expect 2 "--tokens: -5 $range 1..2147483647" put "${common[@]}" --tokens -5
expect 2 "--tokens: -1 $range 1..2147483647" put "${common[@]}" --tokens=-1
expect 2 "--tokens: 1000000000000 $range 1..2147483647" put "${common[@]}" --tokens 1000000000000
expect 2 "--tokens: 2147483648 $range 1..2147483647" put "${common[@]}" --tokens 2147483648
expect 2 "--tokens: 1099511627776 $range 1..2147483647" get "${common[@]}" --tokens 1099511627776
expect 2 "--tokens: 99999999999999999999 $range" put "${common[@]}" --tokens 99999999999999999999
expect 2 "--tokens: 0x10 $range" put "${common[@]}" --tokens 0x10
expect 2 "--sessions: -1 $range 1..2147483647" put "${common[@]}" --tokens 10 --sessions -1
expect 2 "--seed: -1 $range 0..9223372036854775807" put "${common[@]}" --tokens 10 --seed -1
expect 2 "--seed: -1 $range 0.." get "${common[@]}" --tokens 10 --seed -1
# "-4294967295" is 1 once wrapped into a 32-bit option.
expect 2 "--tp-rank: -4294967295 $range 0..4294967295" put "${common[@]}" --tokens 10 --tp-rank -4294967295
expect 2 "--tp-world: -1 $range 0..4294967295" ls "${readers[@]}" --tp-world -1
expect 2 "--chunk-tokens: -1 $range 0..4294967295" stat "${readers[@]}" --chunk-tokens -1
expect 2 "--chunk-tokens: 4294967296 $range 0..4294967295" verify "${readers[@]}" --chunk-tokens 4294967296
# In the type's range, the geometry's own bounds apply.
expect 2 "chunk_tokens 65537 not in 1..65536" stat "${readers[@]}" --chunk-tokens 65537
for opt in --sessions --tokens --tokens-min --tokens-max --seed --repeat --ranks --host-load; do
  expect 2 "$opt: -1 $range" bench --store "$work/b" --model tiny "$opt" -1
done
expect 2 "--gpu: -1 $range 0..2147483647" bench-rank --store "$work/b" --model tiny --max-tokens 10 --gpu -1
expect 2 "--max-tokens: -1 $range 1..2147483647" bench-rank --store "$work/b" --model tiny --max-tokens -1
# Leading zeros are decimal, not octal (CLI11 alone reads 010 as 8).
expect 0 "tokens=10 " put --store "$work/decimal" --model tiny --tokens 010

# A session whose KV cannot fit in memory is refused before anything is allocated or created
# (it was a std::bad_alloc abort after the store was made): 2^31-1 tokens of tiny are 2 TiB.
expect 4 "MemAvailable" put --store "$work/huge" --model tiny --tokens 2147483647
if [[ ! -e "$work/huge" ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: store made"; fi
expect 4 "MemAvailable" get "${common[@]}" --tokens 2147483647
expect 4 "MemAvailable" bench --store "$work/b" --model tiny --tokens 2147483647
expect 2 "--sessions: 100001 $range 1..100000" bench --store "$work/b" --model tiny --sessions 100001
# A DRAM tier larger than memory: a resource error naming the limit, not "internal error".
expect 4 "MemAvailable" get "${common[@]}" --tokens 1000 --io dram --dram 1T

# bench (pairs) with its default capacity for a model whose KV is not a multiple of 4 KiB.
expect 0 "byte-exact" bench --store "$work" --model tiny --sessions 1 --tokens 1000 --repeat 1 --paths direct

# A directory we may not write: permission denied is an OS error (exit 4, as README's table says).
# Root may write anywhere, so as root the case runs as nobody where setpriv can do that.
mkdir -p "$work/ro" && chmod 0500 "$work/ro"
if [[ $(id -u) -ne 0 ]]; then
  expect 4 "permission denied" put --store "$work/ro/s" --model tiny --tokens 10
elif chmod 0711 "$work" && setpriv --reuid=65534 --regid=65534 --clear-groups "$kvtier" --version >/dev/null 2>&1; then
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$kvtier" put --store "$work/ro/s" --model tiny \
        --tokens 10 2>&1)
  rc=$?
  if [[ $rc -eq 4 && "$out" == *"permission denied"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: put into a read-only directory as nobody -> rc $rc (want 4): $out"
  fi
else
  echo "skip: the permission case needs a user other than root (setpriv could not run kvtier as nobody)"
fi

# A corrupt store: damaged manifest, then a damaged record found by verify.
cp -r "$s" "$work/damaged"
echo "{ nope" > "$work/damaged/rank0of1/MANIFEST.json"
expect 3 "MANIFEST.json" get --store "$work/damaged" --model tiny --tokens 10
seg=$(ls "$s"/rank0of1/seg-*.kvt | head -1)
printf '\xff\xff\xff\xff' | dd of="$seg" bs=1 seek=$((4096 + 100)) conv=notrunc status=none
expect 1 "1 corrupt" verify "${readers[@]}"
expect 1 "restored 0/1000" get "${common[@]}" --tokens 1000

# A store asked to hold more than its capacity.
expect 3 "capacity" put --store "$work/small" --model tiny --segment-size 1M --capacity 2M --tokens 5000

# A full disk: a 6 MiB tmpfs (mounting needs root; skipped otherwise).
mkdir -p "$work/full"
if mount -t tmpfs -o size=6m kvtier-cli-test "$work/full" 2>/dev/null; then
  expect 4 "no space" put --store "$work/full/s" --model tiny --segment-size 4M --capacity 64M --tokens 9000
  umount "$work/full"
else
  echo "skip: full-disk case needs root to mount a small tmpfs"
fi

# The independent ceiling: fio replays each restore's reads (100 MB a session: enough for fio's
# millisecond clock); its GB/s and the ratio to it are numbers, not n/a. Without fio: said loudly.
expect 0 "GB/s by depth" bench --store "$work/fio" --model tiny --sessions 1 --tokens 200000 --repeat 1 \
  --capacity 512M --segment-size 16M \
  --paths direct --json "$work/fio.json"
if python3 -c "import json, sys; p = json.load(open(sys.argv[1]))['paths'][0]; \
    sys.exit(not (p['fio_gb_per_s'] > 0 and p['ratio_to_fio'] > 0 and len(p['fio_seconds']) == 1))" "$work/fio.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: bench JSON lacks fio's ceiling"
fi
expect 0 "fio ('$work/no-fio') not found" bench --store "$work/fio" --model tiny --sessions 1 --tokens 1000 \
  --repeat 1 --paths direct --fio "$work/no-fio"
expect 0 "fio       off" bench --store "$work/fio" --model tiny --sessions 1 --tokens 1000 --repeat 1 --paths direct \
  --fio off

# ls and stat beside a writer: a real process saving all along (the test helper's save loop on
# the tiny store) is neither refused nor held up, and stat counts at least what it acknowledged.
if [[ -n "$helper" ]]; then
  busy="$work/busy"
  "$helper" save-loop "$busy" 5 >"$work/acks" 2>"$work/helper.err" &
  writer=$!
  for _ in $(seq 600); do [[ $(wc -l <"$work/acks") -ge 3 ]] && break; sleep 0.1; done
  for _ in $(seq 10); do
    acked=$(wc -l <"$work/acks")
    out=$("$kvtier" stat --store "$busy" --model tiny --json 2>&1)
    records=$(sed -n 's/.*"records": \([0-9]*\).*/\1/p' <<<"$out")
    if [[ -n "$records" && $records -ge $acked ]]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1)); echo "FAIL: stat beside a writer (acked $acked): $out"
    fi
    expect 0 "segment" ls --store "$busy" --model tiny
  done
  before=$(wc -l <"$work/acks")
  sleep 1
  if kill -0 "$writer" 2>/dev/null && [[ $(wc -l <"$work/acks") -gt $before ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: the writer stopped beside ls/stat: $(cat "$work/helper.err")"
  fi
  expect 3 "in use by another kvtier engine" put --store "$busy" --model tiny --tokens 10
  kill "$writer"; wait "$writer" 2>/dev/null
else
  echo "skip: ls and stat beside a writer need kvtier_test_helper (second argument)"
fi

# The seed workload, scaled down: two rank processes, host-emulated device, a chunk sweep.
seed=(bench --workload seed --model tiny --store "$work/seed" --sessions 2 --segment-size 8M --capacity 256M)
expect 0 "| posix | 256 |" "${seed[@]}" --tokens-min 500 --tokens-max 900 --device host --out "$work/seed-out" \
  --chunk-sweep 64 --paths posix,dram,buffered
for f in seed.json seed.csv table.md; do
  if [[ -s "$work/seed-out/$f" ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: no $f"; fi
done
if grep -q "| posix | 64 |" "$work/seed-out/table.md" && grep -q '"exact": true' "$work/seed-out/seed.json" &&
   ! grep -q '"exact": false' "$work/seed-out/seed.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: seed table lacks the sweep or a restore was not byte-exact"
fi
# fio's ceiling is the drive's best pattern: kvtier's request size and the sizes given, every depth.
# Sessions of 16 MB: fio's runs must last long enough to time (it counts whole milliseconds).
if command -v fio > /dev/null; then
  expect 0 "by request size and depth" "${seed[@]}" --tokens 16384 --device host --paths posix --no-report \
    --out "$work/fio-out" --fio-requests 64K,256K
  if grep -q '"kvtier_request_bytes"' "$work/fio-out/seed.json" && grep -q '"request_bytes": 65536' "$work/fio-out/seed.json"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: seed.json's fio sweep lacks the sizes asked for"
  fi
fi
# A bench refused for its flags makes nothing: run from an empty directory, checked at the end.
mkdir "$work/cwd" && cd "$work/cwd" || exit 1
expect 2 "is not a request size" "${seed[@]}" --tokens 600 --fio-requests 1M,5000 --no-report
# Any TP size: TP 1 restores what the two ranks saved into a TP-free store, and two ranks started
# afresh do too (the same-TP row a TP change is held against), every byte checked (exit 1 if not);
# sizes the model or the store cannot serve are refused before anything is saved.
expect 0 "| posix TP 2->1 |" "${seed[@]}" --tokens 600 --device host --paths posix --no-report --fio off \
  --store-format 2 --restore-ranks 1,2 --out "$work/tp-out"
if grep -q '^| posix TP 2->2 |' "$work/tp-out/table.md" && grep -q '"tp_restored": 2' "$work/tp-out/seed.json" &&
   ! grep -q '"exact": false' "$work/tp-out/seed.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: --restore-ranks 1,2 after --ranks 2 gave no byte-exact row 'posix TP 2->2'"
fi
# Coded records in the seed workload: bf16-like synthetic KV kept coded (the store reads fewer
# bytes than the KV it delivers), from the drive and the DRAM tier, every byte checked.
expect 0 "bytes per KV byte (coded records" "${seed[@]}" --tokens 2000 --device host --paths posix,dram \
  --no-report --fio off --store-format 2 --compress split16 --kv bf16-like --out "$work/coded-out"
if grep -q '"exact": true' "$work/coded-out/seed.json" && ! grep -q '"exact": false' "$work/coded-out/seed.json" &&
   grep -q 'bf16-like' "$work/coded-out/seed.json"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: a coded seed restore was not byte-exact, or seed.json does not say its KV"
fi
# A forward pass's KV as bench/codec/forward_kv.py writes it (raw bf16 [2, layers, tokens, kv_heads,
# head_dim] and its .json), made up here: bf16 of normal values, whose exponents cluster as a real
# KV's do. make_kv <path> <layers> <tokens> <kv_heads> <head_dim>
make_kv() {
  python3 - "$@" <<'PY'
import json, random, struct, sys
path, shape = sys.argv[1], [2] + [int(a) for a in sys.argv[2:]]
n = shape[0] * shape[1] * shape[2] * shape[3] * shape[4]
rng = random.Random(7)
words = [struct.unpack("<I", struct.pack("<f", rng.gauss(0, 1)))[0] >> 16 for _ in range(n)]
open(path, "wb").write(struct.pack("<%dH" % n, *words))
json.dump({"file": path, "shape": shape, "dtype": "bfloat16", "model": "made up by cli_test.sh, no model",
           "tokens": shape[2]}, open(path + ".json", "w"))
PY
}
# The seed workload on it: one layer, 300 tokens and one head of tiny's head_dim, tiled over tiny's
# two layers and two heads and sessions of 2000 tokens, kept coded, every byte of every restore
# checked; seed.json names the file.
make_kv "$work/kv.bin" 1 300 1 64
expect 0 "bytes per KV byte (coded records" "${seed[@]}" --tokens 2000 --device host --paths posix,dram \
  --no-report --fio off --store-format 2 --compress split16 --kv "file:$work/kv.bin" --out "$work/file-out"
if grep -q '"exact": true' "$work/file-out/seed.json" && ! grep -q '"exact": false' "$work/file-out/seed.json" &&
   grep -q "forward-pass KV from $work/kv.bin (made up by cli_test.sh" "$work/file-out/seed.json" &&
   grep -q "KV: forward-pass KV from $work/kv.bin" "$work/file-out/table.md"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: a seed restore of file KV was not byte-exact, or seed.json or the table does not name the file"
fi
# A file the run cannot use is refused before the output directory is made (the empty directory is
# checked below).
expect 2 "--kv file:$work/none.bin: cannot be read" "${seed[@]}" --tokens 600 --kv "file:$work/none.bin" --no-report
head -c 1000 "$work/kv.bin" > "$work/short.bin" && cp "$work/kv.bin.json" "$work/short.bin.json"
expect 2 "short.bin: is 1000 bytes; the shape [2, 1, 300, 1, 64] of bfloat16" "${seed[@]}" --tokens 600 \
  --kv "file:$work/short.bin" --no-report
cp "$work/kv.bin" "$work/bare.bin"
expect 2 "its sidecar $work/bare.bin.json cannot be read" "${seed[@]}" --tokens 600 --kv "file:$work/bare.bin" --no-report
make_kv "$work/wide.bin" 1 8 1 128
expect 2 "its heads are 128 elements (shape [2, 1, 8, 1, 128]); tiny's head_dim is 64" "${seed[@]}" --tokens 600 \
  --kv "file:$work/wide.bin" --no-report
expect 2 "--kv: 'zipf' is not random, bf16-like or file:PATH" "${seed[@]}" --tokens 600 --kv zipf --no-report
expect 2 "--kv: 'file:' is not random, bf16-like or file:PATH" "${seed[@]}" --tokens 600 --kv file: --no-report
expect 2 "--restore-ranks 4: tiny has 2 KV heads" "${seed[@]}" --tokens 600 --store-format 2 --restore-ranks 4
expect 2 "needs --store-format 2" "${seed[@]}" --tokens 600 --restore-ranks 1
expect 2 "1 is listed twice" "${seed[@]}" --tokens 600 --store-format 2 --restore-ranks 1,1
expect 0 "| posix | 2 |" "${seed[@]}" --tokens 600 --device host --concurrency 1,2 --host-load 1 \
  --paths posix,dram --out "$work/conc-out"
expect 2 "is not 1..64" "${seed[@]}" --tokens 600 --concurrency 0 --no-report
expect 2 "expected posix, gds, dram or buffered" "${seed[@]}" --paths nvme --no-report
expect 2 "is empty" "${seed[@]}" --tokens-min 900 --tokens-max 500 --no-report
expect 2 "--device: cuda-ish not in" "${seed[@]}" --tokens 500 --device cuda-ish --no-report
expect 2 "--concurrency: ',' names no level" "${seed[@]}" --tokens 600 --concurrency , --no-report
expect 2 "is not 1..64" bench --workload seed --model tiny --store "$work/cwd/never" --concurrency 0 --no-report
if [[ -z $(ls -A "$work/cwd") ]]; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL: refused benches left $(ls -A "$work/cwd") behind"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
