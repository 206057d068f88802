#!/usr/bin/env bash
# Building a generation of 100 plugins for six agents against `cp -al` of the result, interleaved
# in one run (cli/benches/generation_build.rs), plus what one generation allocates.
#
# The filesystem measured: by default a dedicated ext4 made for the run (bench/lib/dedicated-ext4.sh:
# mkfs.ext4's defaults, an image in /dev/shm on a loop device; root), so both sides allocate inodes
# from a filesystem in the state this run made. AGENTPACK_BENCH_FS=tmp measures in $TMPDIR as it is.
#
# Usage: bench/generation-build.sh          (from anywhere; builds with the bench profile)
#   AGENTPACK_BENCH_RUNS=5                  rounds (medians)
#   AGENTPACK_BENCH_KEEP=1                  keep the home and write env.sh there, for profiling a build
#                                           (with AGENTPACK_BENCH_FS=tmp: the dedicated mount goes)
#   AGENTPACK_BENCH_FS, AGENTPACK_BENCH_IMAGE_DIR, AGENTPACK_BENCH_IMAGE_MB: see the library
# Prints a Markdown table; docs/src/benchmarks.md records a run with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."

bench=(cargo bench -p agentpack-cli --bench generation_build)
"${bench[@]}" --no-run
source bench/lib/dedicated-ext4.sh
dedicated_ext4 generation-build || exit 0
"${bench[@]}" -- --bench
