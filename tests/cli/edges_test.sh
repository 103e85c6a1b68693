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
limited() { (ulimit -v 3000000 && exec "$kvtier" "$@"); }
out=$(limited put --store "$work/lim" --model tiny --tokens 100 --staging 4G 2>&1)
rc=$?
if [[ $rc -eq 4 && "$out" == *"staging: 4294967296 bytes (4.0 GiB) of host memory asked for: the allocation failed"*"RLIMIT_AS"* ]]; then
  ok
else
  bad "put --staging 4G under ulimit -v -> rc $rc (want 4): $out"
fi
[[ ! -e "$work/lim/rank0of1" ]] && ok || bad "a put refused its staging left a store behind"
expect 4 "DRAM tier: 109951162777600 bytes (100.0 TiB) of host memory asked for, more than is available" \
  put --store "$work/dram" --model tiny --tokens 100 --dram 100T
[[ ! -e "$work/dram/rank0of1" ]] && ok || bad "a put refused its DRAM tier left a store behind"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
