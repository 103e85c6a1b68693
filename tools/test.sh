#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Sets up, builds and runs the whole CPU test suite (GPU tests carry the ctest label `gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh release
ctest --preset release -j "$(nproc)" "$@"
