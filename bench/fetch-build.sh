#!/usr/bin/env bash
# Cold `sync` of 100 plugins from 10 repositories (committed pack.lock, fresh store) against a
# scripted curl + tar xzf + cp -al of the same archives (one after another, 10 in parallel, and one
# after another ending with `sync -f`, as durable as a sync's publication);
# building a generation of the 100 plugins for six agents against `cp -al` of the result; the
# no-op sync of the same project (cli/benches/fetch_build.rs). Everything is local: the fake GitHub
# on 127.0.0.1, private HOME and AGENTPACK_HOME per run.
#
# Usage: bench/fetch-build.sh              (from anywhere; builds with the bench profile)
#   AGENTPACK_BENCH_RUNS=5                 runs per side (medians)
#   AGENTPACK_BENCH_STRACE=/tmp/s.txt      one more cold sync under `strace -f -c -w`, summary there,
#                                          and one under `strace -e trace=openat` (opens per locked file)
#   AGENTPACK_BENCH_BASELINE=/tmp/old/agentpack  also time (and trace) that binary's cold sync,
#                                          interleaved in every round: a before/after ratio in one run
#   AGENTPACK_BENCH_BIN=/tmp/new/agentpack   measure that copy instead of target/release/agentpack
# Prints a Markdown table; docs/src/benchmarks.md records a run with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p agentpack-cli --bench fetch_build -- --bench
