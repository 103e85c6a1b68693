#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Virtual environments in which vLLM's own classes import on a machine without a GPU, for the vLLM
# connector's test (tests/python/test_vllm_connector.py): the newest vLLM in .venv-vllm and 0.26.0
# (the version the reference evaluation served with, and the one that runs on the H200 image) in
# .venv-vllm-0.26. vLLM's full dependency set pins GPU kernels that PyPI does not always carry (and
# nothing here runs a model): vLLM is installed without its dependencies, with torch at the version
# it pins and the packages its config, scheduler, attention-backend and connector modules import.
# About 6 GB each, minutes the first time; skipped when already there.
# Usage: tools/setup_vllm.sh [VERSION ...]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."

# version -> "venv torch extra-pins"
declare -A envs=(
  [0.34.0]=".venv-vllm 2.14.0 transformers>=5.16.1,<5.23 xgrammar==0.2.8"
  [0.26.0]=".venv-vllm-0.26 2.11.0 transformers>=5.5.3,<5.23 xgrammar==0.2.9 openai-harmony openai<3"
)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.34.0 0.26.0)

for version in "${versions[@]}"; do
  [ -n "${envs[$version]:-}" ] || { echo "setup_vllm: no recipe for vLLM $version (have: ${!envs[*]})" >&2; exit 2; }
  read -r venv torch_version pins <<<"${envs[$version]}"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm, torch, zmq" 2>/dev/null \
     && [ "$("$venv/bin/python" -c 'import vllm; print(vllm.__version__)' 2>/dev/null)" = "$version" ]; then
    continue
  fi
  echo "setup: vLLM $version test environment in $venv (torch $torch_version, no GPU needed)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" "torch==$torch_version"
  "${pip[@]}" --no-deps "vllm==$version"
  # pip then lists every vLLM requirement left out on purpose: that list is noise here.
  # shellcheck disable=SC2086  # the pins are words on purpose
  "${pip[@]}" numpy pyzmq regex cachetools psutil requests tqdm blake3 py-cpuinfo $pins \
    pydantic msgspec cloudpickle cbor2 pybase64 pyyaml einops setproctitle typing_extensions aiohttp pillow \
    uvloop prometheus_client "llguidance>=1.7,<1.8" 2>&1 | grep -v "requires\|resolver" || true
  "$venv/bin/python" -c "import vllm.distributed.kv_transfer.kv_connector.v1.base, vllm.v1.request, vllm.config"
done
