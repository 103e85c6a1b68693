# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
# Fast drives on the H200 VM (sourced, not run). It has no NVMe, brd or null_blk; a loop device with
# direct I/O over a file in /dev/shm, formatted ext4, reads at 5-8 GB/s. It is RAM-BACKED: its
# "device" reads are CPU copies by the loop driver's worker, competing with everything else for
# cores and memory bandwidth. Every output that uses one says so (FAST_DRIVE_LABEL).
FAST_DRIVE_LABEL="RAM-backed loop device standing in for NVMe (losetup --direct-io=on over /dev/shm, ext4; its reads are CPU copies)"

# make_fast_drives N GIB: N drives of GIB each, mounted on /mnt/fast0..N-1, each with the cuFile
# udev entry (device-notes.md) so cuFile registers their files (compat mode: no P2P on this VM).
# The backing files are sparse: RAM is taken as data is written, so the caller sizes what it writes
# (all drives' data, the GPU's pinned staging and the rest of the workload share the 125 GiB).
# Refuses drives that would not all fit in /dev/shm, or one of which, filled, would leave under
# 24 GiB of memory (what they hold together is the caller's to size).
make_fast_drives() {
  local n=$1 gib=$2 i dev mm avail shm
  avail=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  shm=$(df -BG --output=avail /dev/shm | tail -1 | tr -dc 0-9)
  if (( gib + 24 > avail || n * gib > shm )); then
    echo "make_fast_drives: $n x $gib GiB: $avail GiB of memory available, $shm GiB free in /dev/shm" >&2
    return 1
  fi
  for ((i = 0; i < n; i++)); do
    truncate -s "${gib}G" "/dev/shm/fast$i.img"
    dev=$(losetup --direct-io=on -f --show "/dev/shm/fast$i.img")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
    mkdir -p "/mnt/fast$i"
    mount "$dev" "/mnt/fast$i"
    mm=$(mountpoint -d "/mnt/fast$i")
    mkdir -p /run/udev/data
    printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > "/run/udev/data/b$mm"
    echo "fast drive $i: $dev ($mm) on /mnt/fast$i, ${gib} GiB: $FAST_DRIVE_LABEL"
  done
}

# fast_drives_run RESULTS N GIB: the start of a fast-drive call (h200_common.sh sourced first):
# build, results under /root/RESULTS (h200_results), the label, and N fresh drives of GIB each.
fast_drives_run() {
  h200_build || return 1
  h200_results "$1"
  say "LABEL: $FAST_DRIVE_LABEL"
  drop_fast_drives 2>/dev/null
  make_fast_drives "$2" "$3" | tee -a "$OUT/summary.txt"
  return "${PIPESTATUS[0]}"
}

# fast_drive_list N DIR: the roots /mnt/fast0/DIR,...,/mnt/fast<N-1>/DIR of a store over N drives.
fast_drive_list() {
  local i roots=()
  for ((i = 0; i < $1; i++)); do roots+=("/mnt/fast$i/$2"); done
  (IFS=,; echo "${roots[*]}")
}

# drop_fast_drives: unmounts and frees every fast drive (their RAM back).
drop_fast_drives() {
  local m dev
  for m in /mnt/fast*; do
    mountpoint -q "$m" || continue
    dev=$(findmnt -n -o SOURCE "$m")
    umount "$m" && losetup -d "$dev"
  done
  rm -f /dev/shm/fast*.img
}

# make_striped_drive N GIB: one drive striped (device-mapper "striped", 512 KiB chunks) over N
# RAM-backed loop devices of GIB each, ext4, mounted on /mnt/stripe with the cuFile udev entry: what
# a server's RAID 0 over several NVMe drives looks like to a reader of one file. Needs dmsetup and
# the kernel's dm-mod, which the H200 VM lacks.
make_striped_drive() {
  local n=$1 gib=$2 i dev devs=() table sectors mm
  command -v dmsetup >/dev/null || { echo "make_striped_drive: no dmsetup" >&2; return 1; }
  for ((i = 0; i < n; i++)); do
    truncate -s "${gib}G" "/dev/shm/stripe$i.img"
    devs+=("$(losetup --direct-io=on -f --show "/dev/shm/stripe$i.img")")
  done
  sectors=$(( n * gib * 2097152 ))
  table="0 $sectors striped $n 1024"
  for dev in "${devs[@]}"; do table+=" $dev 0"; done
  DM_DISABLE_UDEV=1 dmsetup create kvstripe --noudevsync --table "$table" || return 1
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,stride=128,stripe_width=$(( 128 * n )) \
    /dev/mapper/kvstripe || return 1
  mkdir -p /mnt/stripe && mount /dev/mapper/kvstripe /mnt/stripe || return 1
  mm=$(mountpoint -d /mnt/stripe)
  mkdir -p /run/udev/data
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > "/run/udev/data/b$mm"
  echo "striped drive: dm-striped over ${devs[*]} (512 KiB chunks), $(( n * gib )) GiB on /mnt/stripe: $FAST_DRIVE_LABEL, $n of them striped"
}

# drop_striped_drive: unmounts it and frees its loop devices (their RAM back).
drop_striped_drive() {
  local f dev
  mountpoint -q /mnt/stripe && umount /mnt/stripe
  DM_DISABLE_UDEV=1 dmsetup remove --noudevsync kvstripe 2>/dev/null
  for f in /dev/shm/stripe*.img; do
    [ -e "$f" ] || continue
    for dev in $(losetup -j "$f" -O NAME -n); do losetup -d "$dev"; done
    rm -f "$f"
  done
}
