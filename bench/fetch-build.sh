#!/usr/bin/env bash
# Cold `sync` of 100 plugins from 10 repositories (committed pack.lock, fresh store) against a
# scripted curl + tar xzf + cp -al of the same archives (one after another, 10 in parallel, and one
# after another ending with `sync -f`, as durable as a sync's publication);
# building a generation of the 100 plugins for six agents against `cp -al` of the result; the
# no-op sync of the same project (cli/benches/fetch_build.rs). Everything is local: the fake GitHub
# on 127.0.0.1, private HOME and AGENTPACK_HOME per run.
#
# The filesystem measured: by default a dedicated ext4 made for the run (an image file mounted on a
# loop device, its image in /dev/shm), so the flushes of a sync (`syncfs`) and of the durable floor
# (`sync -f`) wait for this run's dirty pages only, never for what other builds of the machine left
# dirty on the shared disk. The fake GitHub's repositories, every AGENTPACK_HOME, project and staging
# root, and the floors' output all live on it (TMPDIR points there); it is unmounted and removed at
# the end. Without root or a free loop device the script says why and stops (AGENTPACK_BENCH_FS=tmp
# measures in $TMPDIR as before).
#
# Usage: bench/fetch-build.sh              (from anywhere; builds with the bench profile; root for the
#                                          loop mount)
#   AGENTPACK_BENCH_RUNS=5                 runs per side (medians)
#   AGENTPACK_BENCH_FS=loop                loop (the dedicated ext4, default) or tmp ($TMPDIR as it is)
#   AGENTPACK_BENCH_IMAGE_DIR=/dev/shm     where the loop image lives (/var/tmp: an image on the disk)
#   AGENTPACK_BENCH_IMAGE_MB=2048          its size (sparse)
#   AGENTPACK_BENCH_STRACE=/tmp/s.txt      one more cold sync under `strace -f -c -w`, summary there,
#                                          and one under `strace -e trace=openat` (opens per locked file)
#   AGENTPACK_BENCH_PERF=/tmp/perf.data   one more cold sync under `perf record -g`, its data there
#   AGENTPACK_BENCH_LOG=/tmp/sync.log      one more cold sync with `-v`, each line stamped (ms since start)
#   AGENTPACK_BENCH_BASELINE=/tmp/old/agentpack  also time (and trace) that binary's cold sync,
#                                          interleaved in every round: a before/after ratio in one run
#   AGENTPACK_BENCH_BIN=/tmp/new/agentpack   measure that copy instead of target/release/agentpack
#   AGENTPACK_BENCH_ONLY=cold-sync         skip the generation build and the no-op sync
# Prints a Markdown table; docs/src/benchmarks.md records a run with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."

bench=(cargo bench -p agentpack-cli --bench fetch_build)
# Build before mounting: a build takes minutes and needs nothing of the mount.
"${bench[@]}" --no-run
source bench/lib/dedicated-ext4.sh
dedicated_ext4 fetch-build || exit 0
"${bench[@]}" -- --bench
