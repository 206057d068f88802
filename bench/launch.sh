#!/usr/bin/env bash
# Launch overhead: `agentpack claude -- --version` through the fast path with 100 path packages,
# against running the stand-in `claude` script directly (goal: under 10 ms added), and peak memory.
#
# Everything is local: a private HOME, AGENTPACK_HOME and staging root made by the bench
# (cli/benches/launch.rs); the stand-in is a two-line shell script, so no agent is needed.
#
# Usage: bench/launch.sh                   (from anywhere; builds with the bench profile)
#   AGENTPACK_BENCH_RUNS=21                interleaved runs per side
#   AGENTPACK_BENCH_ONLY_SYNC=1            only the no-op sync vs launch fast path table (10 and 100
#                                          path packages)
# Prints a Markdown table; paste it into docs/src/benchmarks-launch.md with the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p agentpack-cli --bench launch -- --bench
