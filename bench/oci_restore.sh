#!/usr/bin/env bash
# Restoring one lock on 10 fresh machines: from an OCI substituter (a real `docker-registry` on
# 127.0.0.1) vs from the local fake GitHub's tarballs; 50 packages from 5 repositories. Counts the
# requests to the fake GitHub (goal with the substituter: 0) and prints the time ratio as a
# Markdown table; docs/src/benchmarks.md records a run. Needs /usr/bin/docker-registry
# (Debian's `docker-registry` package, which .ci/run installs).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p agentpack-cli --bench oci_restore -- --bench
