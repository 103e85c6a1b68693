#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Sets up, builds and runs kvtier's main job: `kvtier bench` on the default workload.
# Extra arguments go to `kvtier bench` (see `build/release/tools/kvtier/kvtier bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh release
exec build/release/tools/kvtier/kvtier bench "$@"
