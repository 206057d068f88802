# Sourced by the bench scripts that measure filesystem work: `dedicated_ext4 NAME` makes a fresh
# ext4 for the run (an image file mounted on a loop device) and exports TMPDIR on it, so what is
# measured waits only for this run's own dirty pages and inodes, never for what other builds left on
# the shared disk (flushes), nor for a filesystem state the run did not make. mkfs.ext4's defaults
# (a journal among them) are what users have; the machine's own root here is an ext4 without a
# journal, where each new inode is checked against every recently deleted one, so timings there
# follow how much the last minute deleted. The mount is removed when the script exits.
#
#   AGENTPACK_BENCH_FS=loop             loop (the dedicated ext4, default) or tmp ($TMPDIR as it is)
#   AGENTPACK_BENCH_IMAGE_DIR=/dev/shm  where the loop image lives (/var/tmp: an image on the disk)
#   AGENTPACK_BENCH_IMAGE_MB=2048       its size (sparse)
#
# Returns 1 (after saying why) when the run should stop: no root, no loop device, no mkfs.ext4.
dedicated_ext4() {
  local name=$1
  case "${AGENTPACK_BENCH_FS:-loop}" in
    tmp)
      echo "filesystem: \$TMPDIR (${TMPDIR:-/tmp}) as it is: $(df --output=fstype "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ')"
      return 0
      ;;
    loop) ;;
    *)
      echo "AGENTPACK_BENCH_FS=$AGENTPACK_BENCH_FS: use loop or tmp" >&2
      exit 2
      ;;
  esac
  if [[ $(id -u) -ne 0 ]]; then
    echo "skipped: the dedicated filesystem needs root to mount a loop device (AGENTPACK_BENCH_FS=tmp measures in \$TMPDIR)" >&2
    return 1
  fi
  if ! command -v mkfs.ext4 >/dev/null || ! losetup -f >/dev/null 2>&1; then
    echo "skipped: no mkfs.ext4 or no free loop device (AGENTPACK_BENCH_FS=tmp measures in \$TMPDIR)" >&2
    return 1
  fi
  local image_dir="${AGENTPACK_BENCH_IMAGE_DIR:-/dev/shm}"
  bench_image=$(mktemp "$image_dir/agentpack-$name.XXXXXX.img")
  bench_mnt=$(mktemp -d "/tmp/agentpack-$name-mnt.XXXXXX")
  trap dedicated_ext4_cleanup EXIT
  truncate -s "${AGENTPACK_BENCH_IMAGE_MB:-2048}M" "$bench_image"
  mkfs.ext4 -q -F "$bench_image"
  if ! mount -o loop "$bench_image" "$bench_mnt"; then
    echo "skipped: cannot mount a loop device here (AGENTPACK_BENCH_FS=tmp measures in \$TMPDIR)" >&2
    return 1
  fi
  mkdir "$bench_mnt/tmp"
  chmod 1777 "$bench_mnt/tmp"
  export TMPDIR="$bench_mnt/tmp"
  echo "filesystem: ext4 on $(findmnt -n -o SOURCE "$bench_mnt"), image $bench_image (${AGENTPACK_BENCH_IMAGE_MB:-2048} MiB, on $(df --output=fstype "$image_dir" | tail -1 | tr -d ' ')), mounted at $bench_mnt"
}

dedicated_ext4_cleanup() {
  if [[ -n "${bench_mnt:-}" ]]; then
    if mountpoint -q "$bench_mnt"; then
      umount "$bench_mnt" || umount -l "$bench_mnt" || true
    fi
    rmdir "$bench_mnt" 2>/dev/null || true
  fi
  [[ -n "${bench_image:-}" ]] && rm -f "$bench_image"
  return 0
}
