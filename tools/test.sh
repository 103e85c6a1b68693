#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Sets up, builds and runs the whole CPU test suite (GPU tests carry the ctest label `gpu`).
# Usage: tools/test.sh          the release build's suite (a few minutes)
#        tools/test.sh --all    also the vLLM connector against vLLM (tools/setup_vllm.sh), the suite
#                               under ASan+UBSan and under TSan, and a short fuzz run of every
#                               libFuzzer target (what CI runs; ~20 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = "--all" ]; then
  all=1
  shift
fi
# CI also tests the vLLM connector against vLLM itself (a ~4 GB environment, made once).
if [ "$all" = 1 ]; then tools/setup_vllm.sh; fi
tools/setup.sh release
ctest --preset release -j "$(nproc)" "$@"
if [ "$all" = 1 ]; then
  for preset in asan tsan; do
    echo "== $preset"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j "$(nproc)" >/dev/null
    ctest --preset "$preset" -j "$(nproc)" "$@"
  done
  echo "== fuzz (20 s per target, from the committed corpus)"
  tools/fuzz.sh 20
fi
