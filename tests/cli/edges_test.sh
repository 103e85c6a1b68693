#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# The kvtier CLI at its edges (issue 30): one grammar for sizes, paths that are not plain
# directories, parser errors, messages in flags and human sizes, commands that find the geometry in
# the store, resources named with their numbers. Fast: tiny sessions only.
# Usage: edges_test.sh <path to kvtier>
set -u
kvtier="$1"
work=$(mktemp -d "${KVTIER_TEST_DIR:-/tmp}/kvtier-edges-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect <exit code> <text expected in output> <args...>
expect() {
  local want_rc="$1" want_text="$2"
  shift 2
  local out rc
  out=$(timeout "${KVTIER_CLI_TIMEOUT:-120}" "$kvtier" "$@" 2>&1 </dev/null)
  rc=$?
  if [[ $rc -eq $want_rc && "$out" == *"$want_text"* ]]; then
    ok
  else
    bad "kvtier $* -> rc $rc (want $want_rc), output:"
    echo "$out" | head -5
    echo "  (wanted text: $want_text)"
  fi
}

# expect_not <text that must not appear> <args...>: any exit code.
expect_not() {
  local unwanted="$1"
  shift
  local out
  out=$(timeout "${KVTIER_CLI_TIMEOUT:-120}" "$kvtier" "$@" 2>&1 </dev/null)
  if [[ "$out" != *"$unwanted"* ]]; then ok; else bad "kvtier $* says '$unwanted':"; echo "$out" | head -5; fi
}

s="$work/store"
t=(--store "$s" --model tiny)

# Sizes: one grammar, decimal with an optional binary unit. strtod read hex and exponents.
expect 2 "--capacity: size '0x1000000' is hexadecimal" put "${t[@]}" --tokens 10 --capacity 0x1000000
expect 2 "--capacity: size '1e3' has an unknown unit 'e3'" put "${t[@]}" --tokens 10 --capacity 1e3
expect 2 "--staging: size '+128M'" put "${t[@]}" --tokens 10 --staging +128M
expect 2 "K, M, G or T" get "${t[@]}" --tokens 10 --dram inf
expect 2 "is not a whole number of bytes" put "${t[@]}" --tokens 10 --segment-size 0.3K
[[ ! -e "$s" ]] && ok || bad "a refused size left $s behind"

# Host memory the engine cannot have is a resource error (exit 4) with the numbers, and an engine
# that cannot start leaves no store behind. Under a limit of the address space: the staging
# allocation itself fails (it was "internal error: out of host memory", exit 70).
# A sanitizer's runtime reserves terabytes of shadow address space at start: under such a limit it
# cannot start at all, so these two checks run in the plain builds only.
limited() { (ulimit -v 3000000 && exec "$kvtier" "$@"); }
if ldd "$kvtier" 2>/dev/null | grep -Eq 'lib(a|t)san'; then
  echo "skip: put --staging 4G under ulimit -v (a sanitizer build cannot run under an address-space limit)"
else
  out=$(limited put --store "$work/lim" --model tiny --tokens 100 --staging 4G 2>&1)
  rc=$?
  if [[ $rc -eq 4 && "$out" == *"staging: 4294967296 bytes (4.0 GiB) of host memory asked for: the allocation failed"*"RLIMIT_AS"* ]]; then
    ok
  else
    bad "put --staging 4G under ulimit -v -> rc $rc (want 4): $out"
  fi
  [[ ! -e "$work/lim/rank0of1" ]] && ok || bad "a put refused its staging left a store behind"
fi
expect 4 "DRAM tier: 109951162777600 bytes (100.0 TiB) of host memory asked for, more than is available" \
  put --store "$work/dram" --model tiny --tokens 100 --dram 100T
[[ ! -e "$work/dram/rank0of1" ]] && ok || bad "a put refused its DRAM tier left a store behind"

# Parser errors: an unknown flag is said even when a required one is missing too, and every
# error says "kvtier: <command>:" as the commands' own do.
expect 2 "kvtier: put: The following argument was not expected: --bogus" put --model tiny --bogus
expect 2 "kvtier: put: invalid argument: --tokens is required" put "${t[@]}"
expect 2 "kvtier: get: --tokens: x is not a whole number" get "${t[@]}" --tokens x
expect 2 "kvtier: The following argument was not expected: frobnicate" frobnicate
expect 2 "gds or dram" put "${t[@]}" --tokens 10 --io foo
# Messages name flags and sizes as typed, not C++ members and raw bytes.
expect 2 "--capacity 1 KiB is less than one segment (16 MiB" put "${t[@]}" --tokens 10 --capacity 1K
expect 2 "--segment-size 32 MiB exceeds --capacity 16 MiB" put "${t[@]}" --tokens 10 --capacity 16M --segment-size 32M
expect 2 "--staging 1 MiB is less than one request (--request-size 16 MiB)" put "${t[@]}" --tokens 10 --staging 1M
expect 2 "--request-size 5000 B is not a multiple of 4 KiB" put "${t[@]}" --tokens 10 --request-size 5000
expect_not "_bytes" put "${t[@]}" --tokens 10 --capacity 1K
[[ ! -e "$s" ]] && ok || bad "a refused put left $s behind"

# get, ls, stat and verify find the geometry in the store; get allocates what the store's model
# needs (it allocated 1.97 GB for the default model, then failed on the geometry).
expect 0 "chunks written=1" put "${t[@]}" --tokens 100 --segment-size 16M --capacity 64M
expect 0 "restored 100/100" get --store "$s" --tokens 100
expect_not "1.97 GB" get --store "$s" --tokens 20000
expect 0 "segment" ls --store "$s"
expect 0 '"records": 1' stat --store "$s" --json
expect 0 "verified 1 records" verify --store "$s"
expect 3 "was created for" get --store "$s" --tokens 100 --chunk-tokens 128
expect 3 "was created for" get --store "$s" --model llama-3-8b --tokens 100
expect 0 "chunks written=0 present=1" put --store "$s" --tokens 100
expect 2 "--segment-size 32 MiB: the store" put --store "$s" --tokens 100 --segment-size 32M
expect 3 "no store at" get --store "$work/none" --tokens 10
# The seed, not a session index; short times in ms, not "0.0 s".
expect 0 "in all" put --store "$s" --tokens 100 --seed 5
expect_not "0.0 s in all" put --store "$s" --tokens 100 --seed 5
expect_not "put session" put --store "$s" --tokens 100 --seed 5
expect 0 " ms in all" get --store "$s" --tokens 100 --seed 5

# A --store path that is not a plain directory is said as what it is.
ln -s "$work/nowhere" "$work/dangling"
ln -s "$work/loop-b" "$work/loop-a" && ln -s "$work/loop-a" "$work/loop-b"
expect 2 "$work/dangling is a symbolic link to '$work/nowhere', which does not exist" put --store "$work/dangling" --model tiny --tokens 10
expect 2 "$work/dangling is a symbolic link to" get --store "$work/dangling" --model tiny --tokens 10
expect 2 "$work/loop-a is a symbolic link that loops" put --store "$work/loop-a" --model tiny --tokens 10
expect_not "File exists" put --store "$work/loop-a" --model tiny --tokens 10
# A comma separates drives; a path with one in its name is refused, saying so.
mkdir -p "$work/with,comma"
expect 2 "a comma separates drives" put --store "$work/with,comma" --model tiny --tokens 10
ln -s "$work/with,comma" "$work/no-comma"
expect 0 "chunks written=1" put --store "$work/no-comma" --model tiny --tokens 10
# --io gds without a GPU: the warning ends with its reason, not a CUDA code read as an errno.
expect_not "(errno" stat --store "$s" --io gds

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
