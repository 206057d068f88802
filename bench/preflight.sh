#!/usr/bin/env bash
# `agentpack preflight --agent claude --json` of a 100-package locked and synced project (the
# issue's "well under a second"), interleaved with `agentpack --version` (process start alone), and
# with the syscall count of one preflight (strace -c -f) when strace is installed.
#
# Everything is local: a private HOME, AGENTPACK_HOME, XDG dirs and staging root under a temporary
# directory, 100 path packages (one skill each), and GitHub pointed at a closed port.
#
# Usage: bench/preflight.sh               (from anywhere; uses target/release/agentpack, building it
#                                          when it is missing)
#   AGENTPACK_BIN=/path/to/agentpack      another binary
#   AGENTPACK_BENCH_RUNS=21               interleaved runs per side
#   AGENTPACK_BENCH_PACKAGES=100          packages in the project
# Prints a Markdown table; paste it into docs/src/preflight.md with the `uptime` line it prints.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${AGENTPACK_BENCH_RUNS:-21}
count=${AGENTPACK_BENCH_PACKAGES:-100}
bin=${AGENTPACK_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/agentpack}
if [ ! -x "$bin" ]; then
  cargo build --release -p agentpack-cli
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config XDG_CACHE_HOME=$work/home/.cache \
  XDG_DATA_HOME=$work/home/.local/share AGENTPACK_HOME=$work/agentpack-home \
  AGENTPACK_STAGING_ROOT=$work/staging AGENTPACK_GITHUB_API_URL=http://127.0.0.1:9 \
  AGENTPACK_GITHUB_URL=http://127.0.0.1:9 npm_config_registry=http://127.0.0.1:9/ \
  GIT_CONFIG_NOSYSTEM=1 NO_COLOR=1
unset GITHUB_TOKEN GH_TOKEN
mkdir -p "$HOME" "$work/project" "$work/packages"
cd "$work/project"
{
  printf 'name = "bench"\nversion = "0.1.0"\n\n[dependencies]\n'
  for i in $(seq -f '%03g' 0 $((count - 1))); do
    mkdir -p "$work/packages/s$i"
    printf -- '---\nname: s%s\ndescription: skill %s\n---\nbody %s\n' "$i" "$i" "$i" \
      >"$work/packages/s$i/SKILL.md"
    printf 's%s = { path = "%s" }\n' "$i" "$work/packages/s$i"
  done
} >agentpack.toml
"$bin" --quiet sync >/dev/null

# One preflight, checked: exit 0 and every package in the plan.
"$bin" preflight --agent claude --json >"$work/report.json"
grep -q '"complete": true' "$work/report.json" || { echo "the plan is not complete" >&2; exit 1; }

now() { date +%s%N; }
pre=() ver=()
for _ in $(seq "$runs"); do
  t0=$(now); "$bin" preflight --agent claude --json >/dev/null; t1=$(now)
  "$bin" --version >/dev/null; t2=$(now)
  pre+=($(((t1 - t0) / 1000))) ver+=($(((t2 - t1) / 1000)))
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%.1f | %.1f | %.1f", a[int((NR+1)/2)]/1000, a[1]/1000, a[NR]/1000}'; }

echo "uptime: $(uptime)"
echo "nproc: $(nproc), $count packages, $runs interleaved runs per side, $("$bin" --version)"
echo
echo "| command | median ms | min ms | max ms |"
echo "| --- | --- | --- | --- |"
echo "| \`preflight --agent claude --json\` | $(stats "${pre[@]}") |"
echo "| \`--version\` (process start) | $(stats "${ver[@]}") |"
if command -v strace >/dev/null; then
  echo
  echo "syscalls of one preflight (strace -c -f, top 8 by count):"
  echo
  strace -c -f -o "$work/strace.txt" "$bin" preflight --agent claude --json >/dev/null
  awk 'NR>2 && $1 !~ /^-/ && NF>=5 && $NF != "total" {print $(NF), $4}' "$work/strace.txt" |
    sort -k2 -n -r | head -8 | awk '{printf "- %s: %s\n", $1, $2}'
  awk '$NF == "total" {printf "- total: %s\n", $4}' "$work/strace.txt"
fi
