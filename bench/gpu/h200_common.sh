# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Steps shared by the H200 scenarios (bench/gpu/h200.sh) and bench/vllm/run_h200.sh (sourced, not
# run). Debian packages the machine lacks travel as .deb files in .deps/ and are unpacked under
# /tmp/deps; logs go to $OUT.
OUT="${OUT:-/tmp/kvtier-out}"
mkdir -p "$OUT" /tmp/deps
for f in .deps/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
# fio (bench/gpu/build_fio.sh): the benchmarks' independent ceiling.
[ -x .deps/fio ] && export PATH="$PWD/.deps:$PATH"
# redis-server and redis-cli (.deps, fetch_debs.sh): after the image's own programs in PATH.
export PATH="$PATH:/tmp/deps/usr/bin"
# Libraries redis links that the image may lack (libssl3, libsystemd0, libatomic1; .deps/fallback):
# unpacked and searched last, only when the loader cannot find them, so that the image's own
# versions stay in use by everything else.
if [ -x /tmp/deps/usr/bin/redis-server ] && ldd /tmp/deps/usr/bin/redis-server | grep -q "not found"; then
  mkdir -p /tmp/deps-fallback
  for f in .deps/fallback/*.deb; do [ -f "$f" ] && dpkg -x "$f" /tmp/deps-fallback; done
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/tmp/deps-fallback/usr/lib/x86_64-linux-gnu:/tmp/deps-fallback/lib/x86_64-linux-gnu"
fi

# hiredis through pkg-config: Debian's hiredis.pc names /usr (and libdir /usr/lib); a copy that
# names /tmp/deps instead, ahead in PKG_CONFIG_PATH. kvtier includes <hiredis/hiredis.h>, so its
# parent directory goes into the flags too. pkgconf from .deps where the image has no pkg-config.
h200_hiredis_pc() {
  local pc=/tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig/hiredis.pc
  [ -f "$pc" ] || return 0
  mkdir -p /tmp/deps/pkgconfig
  sed -e 's#^prefix=/usr$#prefix=/tmp/deps/usr#' \
      -e 's#^libdir=.*#libdir=/tmp/deps/usr/lib/x86_64-linux-gnu#' \
      -e 's#^includedir=/usr/#includedir=/tmp/deps/usr/#' \
      -e 's#^Cflags: -I${includedir}#Cflags: -I${includedir} -I/tmp/deps/usr/include#' \
      "$pc" > /tmp/deps/pkgconfig/hiredis.pc
  export PKG_CONFIG_PATH="/tmp/deps/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  if ! command -v pkg-config >/dev/null && [ -x /tmp/deps/usr/bin/pkgconf ]; then
    H200_PKG_CONFIG=(-DPKG_CONFIG_EXECUTABLE=/tmp/deps/usr/bin/pkgconf)
  fi
}
H200_PKG_CONFIG=()
h200_hiredis_pc

# h200_with_redis: the remote tier required in the build (redis and hiredis from .deps,
# fetch_debs.sh); a build/h200 configured without hiredis is configured again.
h200_with_redis() {
  export KVTIER_WITH_REDIS=ON
  if [ -f build/h200/CMakeCache.txt ] && ! grep -q "^HIREDIS_FOUND:INTERNAL=1" build/h200/CMakeCache.txt; then
    rm -f build/h200/build.ninja
  fi
}

# h200_machine: what the machine is (GPU, link, toolchain, cores, memory, disk, cuFile, nvidia-fs)
# into $OUT/machine.txt.
h200_machine() {
  {
    nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
    g++ --version | head -1; cmake --version | head -1; nvcc --version | tail -1
    nproc; free -g | head -2; df -h / | tail -1; uname -r
    ls -l /usr/local/cuda/include/cufile.h /usr/local/cuda/lib64/libcufile.so* 2>&1 | head -5
    ls /proc/driver/nvidia-fs 2>&1 | head -2
  } > "$OUT/machine.txt" 2>&1
}

# Configures build/h200 once (kept while the machine stays warm) and builds it.
h200_build() {
  if [ ! -f build/h200/build.ninja ]; then
    cmake -S . -B build/h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/deps/usr \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DKVTIER_WITH_CUDA=ON -DKVTIER_WITH_IO_URING=ON \
      -DKVTIER_WITH_REDIS="${KVTIER_WITH_REDIS:-AUTO}" "${H200_PKG_CONFIG[@]}" \
      -DPython_EXECUTABLE="$(command -v python3)" > "$OUT/configure.log" 2>&1 \
      || { tail -30 "$OUT/configure.log"; return 1; }
  fi
  local start
  start=$(date +%s)
  cmake --build build/h200 -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -40; return 1; }
  echo "build: $(( $(date +%s) - start )) s"
}

# Every test (CTEST_ARGS narrows them, e.g. "-L gpu") without the udev entry: cuFile cannot
# register files there, so GDS must fall back and say why.
h200_tests() {
  local start
  start=$(date +%s)
  # shellcheck disable=SC2086
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=fallback ctest --test-dir build/h200 -j 8 --output-on-failure \
    ${CTEST_ARGS:-} > "$OUT/ctest.log" 2>&1
  grep -E "tests passed|Failed|\(Failed\)|\*\*\*" "$OUT/ctest.log" | tail -15
  h200_symbolize "$OUT/ctest.log"
  echo "tests: $(( $(date +%s) - start )) s"
}

# The test machine's udev entry (device-notes.md): a setup step of that machine, never done by
# kvtier; with it cuFile registers files and runs in compat mode.
h200_udev_entry() {
  local mm
  mm=$(mountpoint -d /)
  mkdir -p /run/udev/data
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > "/run/udev/data/b$mm"
}

# The GPU tests again with the udev entry in place: cuFile must be used.
h200_gds_tests() {
  KVTIER_TEST_DIR=/root KVTIER_TEST_EXPECT_GDS=used CUFILE_LOGFILE_PATH="$OUT/cufile.log" \
    build/h200/tests/kvtier_gpu_tests > "$OUT/gpu_tests.log" 2>&1
  grep -E "gds:|FAILED|PASSED|Failure" -A3 "$OUT/gpu_tests.log" | tail -12
  h200_symbolize "$OUT/gpu_tests.log"
}

# h200_symbolize LOG: the stack a crashing GPU test wrote (tests/gpu/crash_report.cpp, frames as
# offsets into kvtier_gpu_tests) as functions and lines, the first crash's, on stdout.
h200_symbolize() {
  local first
  first=$(awk '/fatal signal/ { n++ } n == 1' "$1")
  [ -n "$first" ] || return 0
  grep -m1 "fatal signal" <<< "$first"
  grep -o "kvtier_gpu_tests(+0x[0-9a-f]*)" <<< "$first" | sed 's/.*(+\(0x[0-9a-f]*\))/\1/' \
    | addr2line -f -C -p -e build/h200/tests/kvtier_gpu_tests
}

# The peers' Python environment: the wheels of .whl/ (bench/gpu/fetch_peer_wheels.sh, and nvCOMP's,
# fetch_nvcomp_wheels.sh) under /tmp/site, kvtier's module from build/h200, and the unversioned
# libcufile.so that cufile-python (LMCache's GDS backend) opens, which the image has only under its
# versioned name. nvidia.nvcomp needs nothing more: it dlopens libnvcomp.so.6 from its sibling
# package (nvidia/libnvcomp/lib64) in the same directory.
h200_python_env() {
  local so
  export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/build/h200/python:/tmp/site"
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl > "$OUT/pip.log" 2>&1 || tail -5 "$OUT/pip.log"
  fi
  # Every portion of the nvidia namespace: /tmp/site holds one too once nvCOMP's wheels are there.
  so=$(python3 -c "import glob, nvidia, os; print((sorted(f for p in nvidia.__path__ for f in glob.glob(os.path.join(p, '**', 'libcufile.so.0'), recursive=True)) + [''])[0])" 2>/dev/null)
  if [ -n "$so" ]; then
    mkdir -p /tmp/cufile-lib && ln -sf "$so" /tmp/cufile-lib/libcufile.so
    export LD_LIBRARY_PATH=/tmp/cufile-lib:$LD_LIBRARY_PATH
  fi
}

# h200_seed NAME STORE ARGS...: the seed workload (100K tokens, $SESSIONS sessions, default 1) on
# STORE into /root/runs/NAME, its table rows appended to $OUT/summary.txt; skipped once fewer than
# 70 s of the call's budget are left (h200_left).
h200_seed() {
  local name=$1 store=$2 start
  shift 2
  h200_left 70 || { echo "== $name: skipped (time)" | tee -a "$OUT/summary.txt"; return; }
  start=$(date +%s)
  mkdir -p /root/runs
  stdbuf -oL build/h200/tools/kvtier/kvtier bench --workload seed --store "$store" \
    --sessions "${SESSIONS:-1}" --tokens "${TOKENS:-100000}" --keep --no-report --out "/root/runs/$name" "$@" 2>&1 \
    | grep -v "%$" > "$OUT/$name.txt"
  echo "== $name (--store $store $*): $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
  grep -E "^\| (posix|gds|dram)|^SLOTS |fio ceiling|WARNING|ERROR|^kvtier: " "$OUT/$name.txt" | tee -a "$OUT/summary.txt"
}

# h200_left [MARGIN]: whether more than MARGIN seconds (default 60) of the call's budget are left:
# BUDGET_S seconds (default 540) from when this file was sourced.
H200_T0=$(date +%s)
h200_left() { (( $(date +%s) - H200_T0 < ${BUDGET_S:-540} - ${1:-60} )); }

# h200_results NAME: results go to /root/NAME (OUT from here on), with `say` appending to its
# summary.txt; at exit the summary and a tarball of /root/NAME and /root/runs (the seed runs) land
# in the call's own OUT, which the device tool returns (at most 8 files).
h200_results() {
  H200_FINAL_OUT=$OUT
  OUT=/root/$1
  rm -rf "$OUT" /root/runs && mkdir -p "$OUT" /root/runs
  trap "cp '$OUT/summary.txt' '$H200_FINAL_OUT/' 2>/dev/null; tar -C /root -czf '$H200_FINAL_OUT/runs.tar.gz' '$1' runs 2>/dev/null" EXIT
  say "commit: $(cat .commit 2>/dev/null || echo unknown)"
  # kvtier's own environment overrides change what a run measures: named with its results.
  local overrides
  overrides=$(env | grep '^KVTIER_' | sort | tr '\n' ' ')
  [ -z "$overrides" ] || say "environment: $overrides"
}
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
