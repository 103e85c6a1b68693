#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Downloads NVIDIA's nvCOMP Python package and the library it loads, as wheels for the benchmark
# machine's Python (3.12, x86_64), into .whl/ (git-ignored; a device call carries it): what
# bench/codec/nvcomp_bench.py measures split16 against. h200_python_env installs them under
# /tmp/site, where nvidia.nvcomp loads libnvcomp from its sibling package (nvidia/libnvcomp/lib64).
# Usage: bench/gpu/fetch_nvcomp_wheels.sh [DIR]   (default .whl)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.whl}"
source bench/gpu/wheels_for_device.sh
wheels_for_device "$dir" nvidia-nvcomp-cu13==6.0.0.12 nvidia-libnvcomp-cu13==6.0.0.12
ls "$dir"/nvidia_*nvcomp*
