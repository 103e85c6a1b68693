#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Sets up, builds and runs kvtier's main job: the reference evaluation (`kvtier bench --workload
# seed`), scaled to fit a small machine. Arguments replace the scaling flags (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh release
if [ $# -eq 0 ]; then set -- --sessions 2 --tokens 20000; fi
exec build/release/tools/kvtier/kvtier bench --workload seed "$@"
