#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Installs kvtier's dev component from BUILD_DIR into a temporary prefix, builds the consumer in
# tests/package/consumer against it with find_package(kvtier), runs it, and checks what was
# installed: the versioned library with its SONAME, the headers, the package files.
# Usage: package_test.sh BUILD_DIR
set -euo pipefail
build="$1"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" --component dev >/dev/null
lib="$(find "$tmp/prefix" -name 'libkvtier.so.*.*.*' | head -1)"
[ -n "$lib" ] || { echo "FAIL: no versioned libkvtier.so installed"; exit 1; }
soname="$(objdump -p "$lib" | awk '/SONAME/ {print $2}')"
[ "$soname" = "libkvtier.so.0" ] || { echo "FAIL: SONAME is '$soname', want libkvtier.so.0"; exit 1; }
for f in include/kvtier/kvtier.hpp include/kvtier/build_config.hpp; do
  [ -f "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
cfg="$(find "$tmp/prefix" -name kvtierConfigVersion.cmake | head -1)"
[ -n "$cfg" ] || { echo "FAIL: kvtierConfigVersion.cmake not installed"; exit 1; }
# Nothing of the engine's internals or its dependencies is exported: only the kvtier namespace.
leaked="$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt | grep -v '^kvtier::' | grep -v '^_\|^typeinfo\|^vtable\|^VTT\|^std::\|^__' | head -5 || true)"
[ -z "$leaked" ] || { echo "FAIL: symbols outside kvtier:: exported: $leaked"; exit 1; }
cmake -S "$here/consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer" "$tmp/store"
echo "PASS: installed to a prefix, found with find_package(kvtier), saved and restored"
