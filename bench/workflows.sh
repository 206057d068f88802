#!/usr/bin/env bash
# Whole-workflow benchmarks through the real binary against the local fake GitHub: cold and warm
# `lock` of 50 packages from 5 repositories (with request counts), a no-op `sync`, a 1,000-file
# generation vs `cp -al`, and the disk use of 10 projects x 3 modes. Prints a Markdown table;
# docs/src/benchmarks.md records a run.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p agentpack-cli --bench workflows -- --bench
