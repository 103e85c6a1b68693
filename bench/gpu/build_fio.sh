#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Builds fio for the H200 image, which has no fio and no network: Debian 12's fio source package,
# linked statically with its optional engines off (the Debian binary needs ceph, gluster and rdma
# libraries that image lacks). The binary lands in .deps/fio (git-ignored; a device call carries
# .deps). fio measures the drive's ceiling in the benchmarks: an independent tool, not kvtier's code.
# Usage: bench/gpu/build_fio.sh   (on a Debian 12 machine with apt and a compiler)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lists="$work/lists"
mkdir -p "$lists/partial"
printf 'deb-src http://deb.debian.org/debian bookworm main\n' >"$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$lists")
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only -qq fio >/dev/null)
tar -xzf "$work"/fio_*.orig.tar.gz -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'fio-*' | head -1)
(cd "$src" && ./configure --build-static --disable-native >/dev/null)
make -C "$src" -j"$(nproc)" fio >/dev/null
cp "$src/fio" .deps/fio
strip .deps/fio || true
.deps/fio --version
