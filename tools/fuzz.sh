#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default 60)
# from the committed corpus in tests/fuzz/corpus/<target>. New inputs go to a scratch corpus;
# crashes are written to build/fuzz/crashes/ and fail the script.
# Usage: tools/fuzz.sh [seconds] [target...]   (targets: record_header record_v2 index segment_scan split16)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(record_header record_v2 index segment_scan split16)
if ! command -v clang++ >/dev/null || ! dpkg-query -W libclang-rt-14-dev >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi
cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVTIER_WITH_CUDA=OFF -DKVTIER_BUILD_BENCH=OFF -DKVTIER_BUILD_FUZZ=ON \
  "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fsanitize=fuzzer-no-link -DKVTIER_FUZZ_BUILD_WITHOUT_EXPECTED" >/dev/null
mkdir -p build/fuzz/crashes
for t in "${targets[@]}"; do
  cmake --build build/fuzz --target "kvtier_fuzz_$t" >/dev/null
  scratch=$(mktemp -d)
  echo "fuzz $t for ${seconds}s"
  "build/fuzz/tests/kvtier_fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="build/fuzz/crashes/$t-" "$scratch" "tests/fuzz/corpus/$t" 2>&1 \
    | grep -E "stat::number_of_executed_units|Done|ERROR|crash" || true
  rm -rf "$scratch"
  if ls build/fuzz/crashes/"$t"-* >/dev/null 2>&1; then echo "fuzz $t: crash found"; exit 1; fi
done
