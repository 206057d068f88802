#!/usr/bin/env bash
# Building a generation of 100 plugins for six agents against `cp -al` of the result, interleaved
# in one run (cli/benches/generation_build.rs), plus what one generation allocates.
#
# Usage: bench/generation-build.sh          (from anywhere; builds with the bench profile)
#   AGENTPACK_BENCH_RUNS=5                  rounds (medians)
#   AGENTPACK_BENCH_KEEP=1                  keep the home and write env.sh there, for profiling a build
# Prints a Markdown table; docs/src/benchmarks.md records a run with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p agentpack-cli --bench generation_build -- --bench
