# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Sourced by the fetch_*_wheels.sh scripts: wheels_for_device DIR PACKAGE... downloads the
# packages, without their dependencies, as wheels for the benchmark machine's Python (CPython
# 3.12 on x86_64, the manylinux tags its pip accepts) into DIR.
wheels_for_device() {
  local dir=$1 n platforms=()
  shift
  mkdir -p "$dir"
  for n in 17 24 26 27 28 34; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
  platforms+=(--platform manylinux2014_x86_64)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp "${platforms[@]}" -d "$dir" "$@"
}
