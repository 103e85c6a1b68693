#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Installs what kvtier needs to build and test (Debian 12 packages), then configures and builds.
# Usage: tools/setup.sh [preset]   (default preset: release)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"

packages=(cmake ninja-build g++ python3-matplotlib liburing-dev libxxhash-dev libcli11-dev
          nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev)
# fio: the benchmarks measure the drive's ceiling with it (an independent tool), and a test runs it.
packages+=(fio)
# hiredis: the Redis Cluster remote tier; redis-server and redis-cli: its tests start real clusters.
packages+=(libhiredis-dev redis-server redis-tools)
# clang-format-14: tools/check_format.sh (CI) checks the C++ against .clang-format with it.
packages+=(clang-format-14)
# gdb: a test that hangs has its threads' stacks printed with it (tests/helpers/hang_watchdog.cpp).
packages+=(gdb)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The Python package's build and test needs (PyPI; Debian 12's nanobind is too old or absent).
# prometheus_client: kvtier.metrics (operators' metrics) and its test.
if ! python3 -c "import nanobind, numpy, prometheus_client" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check nanobind numpy prometheus_client >/dev/null 2>&1 \
    || echo "setup: nanobind/numpy/prometheus_client not installed; building without the Python package"
fi

# cufile.h for the GPUDirect Storage path (Debian has no package for it). Optional: without it
# kvtier builds without GDS and says so at run time.
if command -v nvcc >/dev/null && ! python3 -c "import nvidia, os, sys; sys.exit(not any(os.path.exists(os.path.join(p, 'cu13/include/cufile.h')) for p in nvidia.__path__))" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check nvidia-cufile >/dev/null 2>&1 \
    || echo "setup: nvidia-cufile not installed; building without GPUDirect Storage"
fi

cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
