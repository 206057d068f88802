#!/usr/bin/env bash
# Store benchmarks: sha256-tree-v1 vs sha256sum, materialize vs cp -al / cp -r, GC of 1,000 dead
# generations, and peak memory (/usr/bin/time -v) of our hashing vs sha256sum on the same file.
#
# Usage: bench/store/run.sh            (from the repository root)
#   AGENTPACK_BENCH_MB=512             size of the large file (MiB)
#   AGENTPACK_BENCH_DIR=/tmp           where the data goes (pick the filesystem to measure)
# Prints a Markdown table; paste it into docs/src/benchmarks-store.md with the command line.
set -euo pipefail
cd "$(dirname "$0")/../.."

mb="${AGENTPACK_BENCH_MB:-512}"
dir="${AGENTPACK_BENCH_DIR:-${TMPDIR:-/tmp}}"
export AGENTPACK_BENCH_MB="$mb" AGENTPACK_BENCH_DIR="$dir"

# Build once, then run the bench binary directly so /usr/bin/time measures it alone.
bin="$(cargo bench -p agentpack-store --no-run --message-format=json 2>/dev/null \
  | grep '"name":"store"' | grep -o '"executable":"[^"]*"' | head -1 | cut -d'"' -f4)"
if [[ -z "$bin" ]]; then
  echo "could not find the bench binary (cargo bench -p agentpack-store --no-run)" >&2
  exit 1
fi

echo "## agentpack-store benchmarks ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -r))"
echo
/usr/bin/time -v "$bin" --bench 2> >(grep -E "Maximum resident set size" | sed 's/^\s*/bench peak RSS: /' >&2)

# Peak memory of hashing alone: our hash_tree (through the hashmem example of the bench) vs sha256sum.
work="$(mktemp -d "$dir/agentpack-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/tree"
head -c "$((mb * 1024 * 1024))" /dev/urandom > "$work/tree/data.bin"
ours_kb="$( { /usr/bin/time -v "$bin" --hash-only "$work/tree" >/dev/null; } 2>&1 | awk '/Maximum resident/ {print $6}')"
theirs_kb="$( { /usr/bin/time -v sha256sum "$work/tree/data.bin" >/dev/null; } 2>&1 | awk '/Maximum resident/ {print $6}')"
echo
echo "| peak memory hashing one ${mb} MiB file | ours | sha256sum |"
echo "| --- | --- | --- |"
echo "| maximum resident set size | ${ours_kb} KiB | ${theirs_kb} KiB |"
