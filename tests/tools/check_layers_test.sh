#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# tools/check_layers.sh on the repository (passes) and on copies of it with one fault each: an
# upward include, an include between directories of one layer, a public header including src/, a
# directory without a layer, a known exception that no longer exists, a CUDA runtime call or header
# outside src/cuda/. Each must fail, naming it.
# Usage: check_layers_test.sh <repository root>
set -u
repo="$1"
work=$(mktemp -d "${KVTIER_TEST_DIR:-/tmp}/kvtier-layers-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# fresh: a copy of the script, src/ and include/ to break one way.
fresh() {
  rm -rf "$work/r" && mkdir -p "$work/r/tools"
  cp "$repo/tools/check_layers.sh" "$work/r/tools/" && cp -r "$repo/src" "$repo/include" "$work/r/"
}
# expect <exit code> <text in output> <description>
expect() {
  local out rc
  out=$("$work/r/tools/check_layers.sh" 2>&1)
  rc=$?
  if [[ $rc -eq $1 && "$out" == *"$2"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)); echo "FAIL: $3: rc $rc (want $1), output: $out"
  fi
}

fresh
expect 0 "every include points down the layers" "the repository"
fresh
sed -i '0,/^#include "common\/file_system.hpp"/s//#include "engine\/engine_impl.hpp"/' "$work/r/src/store/segment.hpp"
expect 1 "src/store/segment.hpp -> engine/engine_impl.hpp: store (layer 2) may not include engine" "upward"
fresh
echo '#include "common/log.hpp"' >>"$work/r/src/api/options.cpp"
expect 1 "src/api/options.cpp -> common/log.hpp: api (layer 0) may not include common" "up from the bottom"
fresh
echo '#include "device/device.hpp"' >>"$work/r/src/store/store.cpp"
expect 1 "src/store/store.cpp -> device/device.hpp" "same layer"
fresh
echo '#include "store/store.hpp"' >>"$work/r/include/kvtier/engine.hpp"
expect 1 "public headers include only kvtier/ headers" "public header"
fresh
mkdir -p "$work/r/src/newdir"
expect 1 "src/newdir/ has no layer" "unknown directory"
fresh
sed -i 's|^declare -A debt=()|declare -A debt=(["src/io/gds/gds.hpp -> store/segment.hpp"]=1)|' \
  "$work/r/tools/check_layers.sh"
expect 1 "known debt 'src/io/gds/gds.hpp -> store/segment.hpp' is gone" "stale exception"
fresh
printf 'void f() { cudaDeviceSynchronize(); }\n' >>"$work/r/src/io/pipeline.cpp"
expect 1 "src/io/pipeline.cpp:" "a CUDA call outside src/cuda/"
fresh
sed -i '0,/^#include </s//#include <cuda_runtime_api.h>\n#include </' "$work/r/src/engine/save.cpp"
expect 1 "src/engine/save.cpp:" "a CUDA header outside src/cuda/"
fresh
printf '// cudaMalloc(bytes) is what the CUDA device does\n' >>"$work/r/src/io/pipeline.cpp"
printf 'void g() { cudaDeviceSynchronize(); }\n' >>"$work/r/src/cuda/cuda_status.cpp"
expect 0 "every include points down the layers" "CUDA named in a comment, and called under src/cuda/"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
