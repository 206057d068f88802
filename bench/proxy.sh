#!/usr/bin/env bash
# Proxy overhead: streamed SSE responses through `agentpack --proxy claude` against the same
# requests sent straight to the fake upstream, interleaved, from one stand-in `claude` process
# (cli/benches/proxy.rs). Everything is local (127.0.0.1, a private HOME and AGENTPACK_HOME).
#
# Usage: bench/proxy.sh                    (from anywhere; builds with the bench profile)
#   AGENTPACK_BENCH_RUNS=31                interleaved runs per side and size
# Prints a Markdown table; paste it into docs/src/proxy.md with the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p agentpack-cli --bench proxy -- --bench
