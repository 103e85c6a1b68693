#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Downloads what the H200 image lacks to build kvtier: its Debian 12 build dependencies as .deb
# files into .deps/ (h200_common.sh unpacks them under /tmp/deps; redis and hiredis among them) and nanobind as a wheel into
# .whl/ (the Python module), and fio built from source (bench/gpu/build_fio.sh). Both folders are git-ignored; a device call carries them.
# Usage: bench/gpu/fetch_debs.sh   (on a Debian 12 machine with apt)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps .whl
(cd .deps && apt-get download liburing-dev liburing2 libxxhash-dev libxxhash0 libcli11-dev nlohmann-json3-dev \
  libfmt-dev libfmt9 libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian)
# The remote tier: hiredis to build against, redis-server and redis-cli for its tests and the shared
# workload's cluster (bench/gpu/h200.sh shared), with what they link that the image may lack,
# and pkgconf, through which CMake finds hiredis.
(cd .deps && apt-get download libhiredis-dev libhiredis0.14 redis-server redis-tools libjemalloc2 liblzf1   pkgconf-bin libpkgconf3)
# Libraries redis links that most images carry already: h200_common.sh uses them only where missing.
mkdir -p .deps/fallback
(cd .deps/fallback && apt-get download libssl3 libsystemd0 libatomic1)
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp -d .whl nanobind==2.9.2
# fio, the benchmarks' independent ceiling: the image has none (static build, .deps/fio).
bench/gpu/build_fio.sh
ls .deps .whl
