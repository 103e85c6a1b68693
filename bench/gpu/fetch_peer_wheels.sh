#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Downloads the peers the benchmark machine lacks, as wheels for its Python (3.12, x86_64), into
# .whl/ (git-ignored; a device call carries it, bench/gpu/h200.sh installs it under /tmp/site).
# LMCache 0.5.3 because its compiled kernels are built for torch 2.11 + CUDA 13.0, the H200 image's
# pair (0.5.4+ pin torch 2.13); the rest are its and KvikIO's needs missing on that image.
# Usage: bench/gpu/fetch_peer_wheels.sh [DIR]   (default .whl)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.whl}"
source bench/gpu/wheels_for_device.sh
wheels_for_device "$dir" \
  kvikio-cu13==26.10.0 libkvikio-cu13==26.10.0 rapids-logger==0.3.0 \
  lmcache==0.5.3 cachetools==8.0.2 msgspec==0.23.0 pyzmq==27.3.0 aiofile==3.12.3 aiofiles==25.1.0 \
  caio==0.12.10 cufile-python==0.2.0 redis==8.1.0 nvtx==0.2.17
ls "$dir"
