#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Sets up, builds and runs the whole CPU test suite (GPU tests carry the ctest label `gpu`).
# Usage: tools/test.sh          the release build's suite (a few minutes)
#        tools/test.sh --all    also the vLLM connector against vLLM 0.34 and 0.26 (tools/setup_vllm.sh), the suite
#                               under ASan+UBSan and under TSan, and a short fuzz run of every
#                               libFuzzer target (what CI runs; ~13-15 minutes on 2 cores once the
#                               vLLM environment exists)
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = "--all" ]; then
  all=1
  shift
fi

# A line per stage with the time since the start: the sanitizer and fuzz builds take minutes each,
# and a run that says nothing for that long looks hung.
start=$SECONDS
stage() { printf '== %s (at %dm%02ds)\n' "$1" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

# ninja's progress lines thinned to one per tenth of the build; every other line (a compiler
# error, a warning) passes whole.
build_progress() {
  awk -v label="$1" '
    /^\[[0-9]+\/[0-9]+\] / {
      split(substr($1, 2, length($1) - 2), n, "/")
      tenth = int(n[1] * 10 / n[2])
      if (tenth != last) { last = tenth; printf "   %s build %s %d%%\n", label, $1, tenth * 10; fflush() }
      next
    }
    { print; fflush() }'
}

# CI also tests the vLLM connector against vLLM itself (two environments, ~8 GB, made once).
if [ "$all" = 1 ]; then
  stage "vLLM test environments (.venv-vllm: the newest, .venv-vllm-0.26; minutes the first time, then skipped)"
  tools/setup_vllm.sh
fi
stage "layers: no include points up them (tools/check_layers.sh, docs/architecture.md)"
tools/check_layers.sh
stage "release: setup and build"
tools/setup.sh release
stage "format: every C++ and CUDA file as .clang-format says (tools/check_format.sh)"
tools/check_format.sh --all
stage "release: tests"
ctest --preset release -j "$(nproc)" "$@"
if [ "$all" = 1 ]; then
  for preset in asan tsan; do
    stage "$preset: build"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset" -j "$(nproc)" | build_progress "$preset"
    stage "$preset: tests"
    ctest --preset "$preset" -j "$(nproc)" "$@"
  done
  stage "fuzz: builds the libFuzzer targets with clang (a few minutes, quiet), then 20 s per target"
  tools/fuzz.sh 20
fi
stage "done"
