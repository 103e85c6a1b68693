#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Virtual environments in which vLLM's own classes import on a machine without a GPU, for the vLLM
# connector's test (tests/python/test_vllm_connector.py): the newest vLLM in .venv-vllm and 0.26.0
# (the version the reference evaluation served with, and the one that runs on the H200 image) in
# .venv-vllm-0.26. vLLM's full dependency set pins GPU kernels that PyPI does not always carry (and
# nothing here runs a model): vLLM is installed without its dependencies, with torch at the version
# it pins and the packages its config, scheduler, attention-backend and connector modules import.
#
# Disk is what CI machines run short of, so: no pip cache (the wheels would double the footprint),
# torch without triton (its compiler; nothing here compiles a kernel), and the CUDA libraries torch
# loads at import (3 GB) installed once, in .venv-vllm, and linked from .venv-vllm-0.26 when its
# torch asks for the same libraries (same package names: same sonames). About 5 GB for the first
# environment and 2 GB for the second; minutes the first time; skipped when already there.
# Usage: tools/setup_vllm.sh [VERSION ...]   (default: both, newest first)
set -euo pipefail
cd "$(dirname "$0")/.."

# version -> "venv torch xgrammar extra-pins". xgrammar goes in without its dependencies: they name
# torch and triton, and pip would then install every requirement of torch that is left out here.
declare -A envs=(
  [0.34.0]=".venv-vllm 2.14.0 0.2.8 transformers>=5.16.1,<5.23"
  [0.26.0]=".venv-vllm-0.26 2.11.0 0.2.9 transformers>=5.5.3,<5.23 openai-harmony openai<3"
)
cuda_owner=.venv-vllm
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(0.34.0 0.26.0)

# pip lists every requirement left out on purpose (triton, vLLM's GPU kernels, the CUDA libraries
# of the second environment): that list is noise here. Anything else it prints passes.
quiet_resolver() { grep -v "requires .*, which is not installed\|dependency resolver\|dependency conflicts" || true; }

site_packages() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# torch's requirements for this platform, one per line, less triton; with "cuda" only the CUDA
# libraries (the nvidia-* packages and the cuda-toolkit bundle of them), with "rest" all but those.
torch_requirements() {
  "$1/bin/python" - "$2" <<'PY'
import importlib.metadata as md, sys
from packaging.requirements import Requirement
want = sys.argv[1]
for line in md.requires("torch") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name == "triton":
        continue
    cuda = req.name.startswith("nvidia-") or req.name == "cuda-toolkit"
    if cuda == (want == "cuda"):
        print(str(req).split(";")[0])
PY
}

cuda_shared_with_owner() {
  local venv=$1 owner_python=$cuda_owner/bin/python
  [ "$venv" != "$cuda_owner" ] && [ -x "$owner_python" ] || return 1
  # The same torch CUDA requirements, by name and major version, as the owner's torch has.
  [ "$(torch_requirements "$venv" cuda | sed 's/==\([0-9]*\).*/==\1/' | sort)" = \
    "$(torch_requirements "$cuda_owner" cuda | sed 's/==\([0-9]*\).*/==\1/' | sort)" ]
}

for version in "${versions[@]}"; do
  [ -n "${envs[$version]:-}" ] || { echo "setup_vllm: no recipe for vLLM $version (have: ${!envs[*]})" >&2; exit 2; }
  read -r venv torch_version xgrammar_version pins <<<"${envs[$version]}"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm, torch, zmq" 2>/dev/null \
     && [ "$("$venv/bin/python" -c 'import vllm; print(vllm.__version__)' 2>/dev/null)" = "$version" ]; then
    continue
  fi
  echo "setup: vLLM $version test environment in $venv (torch $torch_version, no GPU needed; $(df -h --output=avail . | tail -1 | tr -d ' ') free on this disk)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir)
  "${pip[@]}" packaging
  "${pip[@]}" --no-deps "torch==$torch_version"
  mapfile -t torch_deps < <(torch_requirements "$venv" rest)
  "${pip[@]}" "${torch_deps[@]}" 2>&1 | quiet_resolver
  shared=0
  if cuda_shared_with_owner "$venv"; then
    shared=1
  else
    mapfile -t cuda_deps < <(torch_requirements "$venv" cuda)
    "${pip[@]}" "${cuda_deps[@]}" 2>&1 | quiet_resolver
  fi
  "${pip[@]}" --no-deps "vllm==$version" "xgrammar==$xgrammar_version"
  # shellcheck disable=SC2086  # the pins are words on purpose
  "${pip[@]}" numpy pyzmq regex cachetools psutil requests tqdm blake3 py-cpuinfo $pins \
    pydantic msgspec cloudpickle cbor2 pybase64 pyyaml einops setproctitle typing_extensions aiohttp pillow \
    uvloop prometheus_client "llguidance>=1.7,<1.8" apache-tvm-ffi 2>&1 | quiet_resolver
  if [ "$shared" = 1 ]; then
    # Last, so that no later pip install writes into the owner's packages through the link.
    here=$(site_packages "$venv")
    ln -sT "$(realpath --relative-to="$here" "$(site_packages "$cuda_owner")/nvidia")" "$here/nvidia"
  fi
  if "$venv/bin/python" -c "import triton" 2>/dev/null; then
    echo "setup_vllm: triton was installed into $venv (a new requirement pulls it in): add it to the --no-deps installs" >&2
    exit 1
  fi
  "$venv/bin/python" -c "import torch, vllm.distributed.kv_transfer.kv_connector.v1.base, vllm.v1.request, vllm.config"
  echo "setup: $venv $(du -sh "$venv" | cut -f1)$([ "$shared" = 1 ] && echo ", CUDA libraries linked from $cuda_owner")"
done
