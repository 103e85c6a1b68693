#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# A virtual environment (.venv-vllm) in which vLLM's own classes import on a machine without a GPU,
# for the vLLM connector's test (tests/python/test_vllm_connector.py). vLLM's full dependency set
# pins GPU kernels that PyPI does not always carry (and nothing here runs a model): vLLM is installed
# without its dependencies, with torch at the version it pins and the packages its config,
# scheduler and connector modules import. About 4 GB, a few minutes; skipped when already there.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.34.0
TORCH_VERSION=2.14.0  # what vllm $VLLM_VERSION requires
venv=.venv-vllm
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm, torch, zmq" 2>/dev/null \
   && [ "$("$venv/bin/python" -c 'import vllm; print(vllm.__version__)' 2>/dev/null)" = "$VLLM_VERSION" ]; then
  exit 0
fi
echo "setup: vLLM $VLLM_VERSION test environment in $venv (torch $TORCH_VERSION, no GPU needed)"
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "torch==$TORCH_VERSION"
"${pip[@]}" --no-deps "vllm==$VLLM_VERSION"
# pip then lists every vLLM requirement left out on purpose: that list is noise here.
"${pip[@]}" numpy pyzmq regex cachetools psutil requests tqdm blake3 py-cpuinfo "transformers>=5.16.1,<5.23" \
  pydantic msgspec cloudpickle cbor2 pybase64 pyyaml einops setproctitle typing_extensions aiohttp pillow \
  uvloop prometheus_client "llguidance>=1.7,<1.8" "xgrammar==0.2.8" 2>&1 | grep -v "requires\|resolver" || true
"$venv/bin/python" -c "import vllm.distributed.kv_transfer.kv_connector.v1.base, vllm.v1.request, vllm.config"
