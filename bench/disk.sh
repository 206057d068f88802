#!/usr/bin/env bash
# Store bytes vs unique bytes: 10 projects x 3 modes of the same 20 local (path) packages.
#
# Everything is local: a private HOME, AGENTPACK_HOME and one staging root per project under a temp
# directory; GitHub and npm point at an address nothing listens on. Prints what `du` allocates for the
# store, what `store info --json` says, the unique content bytes of the packages (distinct file
# contents, by SHA-256, their sizes summed once), the generation count and the ratios. The goal
# (issue 14): store bytes at most 1.5x the unique content bytes plus a fixed per-generation overhead.
#
# Usage: bench/disk.sh                 (from anywhere; builds the debug binary if needed: disk use does
#                                       not depend on the profile)
#   AGENTPACK_BIN=path/to/agentpack    use this binary instead
#   AGENTPACK_BENCH_DIR=/var/tmp       where the temp directory goes (the filesystem measured)
#   AGENTPACK_BENCH_KEEP=1             keep the temp directory (its path is printed)
#   AGENTPACK_BENCH_EXAMPLES=1         the two example packages instead (the workflows bench's case)
#   AGENTPACK_BENCH_SKILLS=N           N bare skills instead of 15 (to see what grows with the packages)
#   AGENTPACK_BENCH_SCRIPT_MODE=644    the skills' `scripts/run.sh` not executable (the default, 755, keeps
#                                       every skill directory real: see docs/src/staging.md)
#   AGENTPACK_LINK_MODE=hardlink       as for sync (`du` counts each reflinked copy whole)
# Paste the output into docs/src/benchmarks-store.md with the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
if [[ -z "${AGENTPACK_BIN:-}" ]]; then
  cargo build -q -p agentpack-cli --bin agentpack
  AGENTPACK_BIN="$repo/target/debug/agentpack"
fi
work=$(mktemp -d "${AGENTPACK_BENCH_DIR:-${TMPDIR:-/tmp}}/agentpack-disk.XXXXXX")
if [[ -z "${AGENTPACK_BENCH_KEEP:-}" ]]; then
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
fi

# A private copy: a concurrent build must not replace the binary under a running sync.
cp "$AGENTPACK_BIN" "$work/agentpack"
AGENTPACK_BIN="$work/agentpack"

export HOME="$work/home" AGENTPACK_HOME="$work/agentpack-home"
export XDG_DATA_HOME="$HOME/.local/share" XDG_CACHE_HOME="$HOME/.cache" XDG_CONFIG_HOME="$HOME/.config"
export AGENTPACK_GITHUB_API_URL=http://127.0.0.1:9 AGENTPACK_GITHUB_URL=http://127.0.0.1:9
export npm_config_registry=http://127.0.0.1:9/ NO_COLOR=1
unset GITHUB_TOKEN GH_TOKEN
mkdir -p "$HOME" "$AGENTPACK_HOME"

# 20 packages: 15 skills (SKILL.md, three references, one script) and 5 plugins (manifest, two
# skills, an agent, a command), bodies of varying length so no two files share content.
packages="$work/packages"
body() { # body <seed> <lines>
  local i
  for ((i = 0; i < $2; i++)); do
    printf 'Step %d of %s: read the code around the change, then say what to do and why.\n' "$i" "$1"
  done
}
skill() { # skill <dir> <name> <lines>
  mkdir -p "$1/references" "$1/scripts"
  { printf -- '---\nname: %s\ndescription: the %s skill, for benchmarks\n---\n\n' "$2" "$2"; body "$2" "$3"; } >"$1/SKILL.md"
  for ref in api style faq; do body "$2-$ref" $(($3 / 2)) >"$1/references/$ref.md"; done
  printf '#!/bin/sh\necho %s\n' "$2" >"$1/scripts/run.sh"
  chmod "${AGENTPACK_BENCH_SCRIPT_MODE:-755}" "$1/scripts/run.sh"
}
deps=()
if [[ -n "${AGENTPACK_BENCH_EXAMPLES:-}" ]]; then
  # The workflows bench's case (cli/benches/workflows.rs `dedup_benchmark`): the two example packages.
  mkdir -p "$packages"
  cp -r "$repo/examples/hello-skill" "$repo/examples/review-plugin" "$packages/"
  deps=("hello = { path = \"$packages/hello-skill\" }" "review = { path = \"$packages/review-plugin\" }")
  modes='
[modes.lean]
base = "none"
enable = ["package:hello"]

[modes.review]
base = "all"
disable = ["package:hello"]
'
fi
for p in $( [[ -n "${AGENTPACK_BENCH_EXAMPLES:-}" ]] || seq -w 1 "${AGENTPACK_BENCH_SKILLS:-15}"); do
  skill "$packages/skill$p" "skill$p" $((40 + 10 * 10#$p))
  deps+=("skill$p = { path = \"$packages/skill$p\" }")
done
for p in $( [[ -n "${AGENTPACK_BENCH_EXAMPLES:-}" ]] || seq -w 1 5); do
  dir="$packages/plugin$p"
  mkdir -p "$dir/.claude-plugin" "$dir/agents" "$dir/commands"
  printf '{\n  "name": "plugin%s",\n  "version": "0.1.0",\n  "description": "benchmark plugin %s"\n}\n' "$p" "$p" >"$dir/.claude-plugin/plugin.json"
  skill "$dir/skills/a$p" "plugin$p-a" 80
  skill "$dir/skills/b$p" "plugin$p-b" 120
  { printf -- '---\nname: agent%s\ndescription: reviewer %s\ntools: Read, Grep\n---\n\n' "$p" "$p"; body "agent$p" 30; } >"$dir/agents/agent$p.md"
  { printf -- '---\ndescription: command %s\n---\n\n' "$p"; body "command$p" 10; } >"$dir/commands/cmd$p.md"
  deps+=("plugin$p = { path = \"$dir\" }")
done
if [[ -z "${AGENTPACK_BENCH_EXAMPLES:-}" ]]; then
  modes='
[modes.lean]
base = "none"
enable = ["package:skill01", "package:skill02", "package:plugin1"]

[modes.review]
base = "all"
disable = ["package:skill03", "package:plugin2"]
'
fi

start=$(date +%s.%N)
for i in $(seq 0 9); do
  project="$work/projects/p$i"
  mkdir -p "$project"
  { printf 'name = "bench%s"\nversion = "0.1.0"\n\n[dependencies]\n' "$i"; printf '%s\n' "${deps[@]}"; printf '%s' "$modes"; } >"$project/agentpack.toml"
  for mode in default lean review; do
    (cd "$project" && AGENTPACK_STAGING_ROOT="$work/staging/p$i" "$AGENTPACK_BIN" --quiet --no-progress --mode "$mode" sync)
  done
done
end=$(date +%s.%N)

store="$AGENTPACK_HOME/cache/store/v1"
du_store=$(du -s --block-size=1 "$store" | cut -f1)
info=$("$AGENTPACK_BIN" store info --json)
field() { python3 -c 'import json,sys; d=json.load(sys.stdin)
for k in sys.argv[1].split("."): d=d[k]
print(d)' "$1" <<<"$info"; }
# Unique content of the packages: each distinct file content once (what the user wrote).
unique_src=$(python3 - "$packages" <<'EOF'
import hashlib, os, sys
seen = {}
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        data = open(os.path.join(root, name), "rb").read()
        seen[hashlib.sha256(data).digest()] = len(data)
print(sum(seen.values()))
EOF
)
# The same distinct contents as this filesystem allocates them: one file each, block-rounded.
distinct="$work/distinct"
python3 - "$packages" "$distinct" <<'EOF'
import hashlib, os, shutil, sys
os.makedirs(sys.argv[2])
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(root, name)
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        shutil.copyfile(path, os.path.join(sys.argv[2], digest))
EOF
distinct_du=$(find "$distinct" -type f -printf '%b\n' | awk '{s += $1 * 512} END {print s}')
fs_type=$(findmnt -no FSTYPE -T "$store" 2>/dev/null || stat -f -c %T "$store")
src_files=$(find "$packages" -type f | wc -l)
src_dirs=$(find "$packages" -type d | wc -l)
generations=$(find "$store/gcroots/generations" -type l | wc -l)
dirs=$(find "$store" -type d | wc -l)
gen_paths=$(find "$store" -mindepth 1 -maxdepth 1 -type d -name '*-generation*' | wc -l)
gen_dirs=$(find "$store" -mindepth 2 -path "$store/*-generation*" -type d | wc -l)
gen_links=$(find "$store" -mindepth 2 -path "$store/*-generation*" -type l | wc -l)
store_paths=$(field store_paths)
unique_store=$(field unique_content_bytes)
staging_du=$(du -s --block-size=1 "$work/staging" | cut -f1)

python3 - "$du_store" "$unique_src" "$unique_store" "$generations" "$store_paths" "$dirs" "$staging_du" \
  "$(field allocated.blobs)" "$(field allocated.store_paths)" "$(field allocated.metadata)" \
  "$(field allocated.index)" "$(field allocated.stamps)" "$(field allocated.other)" "$(field allocated.total)" "$src_files" "$src_dirs" \
  "$start" "$end" "$gen_paths" "$gen_dirs" "$gen_links" "${#deps[@]}" "$distinct_du" "$fs_type" "${AGENTPACK_LINK_MODE:-auto}" <<'EOF'
import sys
(du, usrc, ustore, gens, paths, dirs, staging, blobs, trees, meta, index, stamps, other, total, files,
 sdirs, start, end, gen_paths, gen_dirs, gen_links, npkg, distinct, fs_type, link_mode) = sys.argv[1:]
distinct = int(distinct)
du, usrc, ustore, gens, paths, dirs, staging = map(int, (du, usrc, ustore, gens, paths, dirs, staging))
blobs, trees, meta, index, stamps, other, total = map(int, (blobs, trees, meta, index, stamps, other, total))
gen_paths, gen_dirs = int(gen_paths), int(gen_dirs)
mib = lambda b: f"{b / 1048576:.2f} MiB"
print(f"{npkg} packages ({files} files, {sdirs} directories), 10 projects x 3 modes, 30 syncs in {float(end) - float(start):.1f} s")
print(f"filesystem: {fs_type}; link mode: {link_mode}")
print()
print("| measure | bytes | |")
print("| --- | --- | --- |")
print(f"| store, `du -s --block-size=1` | {du:,} | {mib(du)} |")
print(f"| store, `store info` allocated.total | {total:,} | {'equals du' if total == du else f'du differs by {du - total:+,}'} |")
print(f"| of which blobs | {blobs:,} | {mib(blobs)} |")
print(f"| of which store path trees (directories, symlinks) | {trees:,} | {mib(trees)} |")
print(f"| of which metadata (`meta/*.json`) | {meta:,} | {mib(meta)} |")
print(f"| of which index (LMDB) | {index:,} | {mib(index)} |")
print(f"| of which blob stamps (`stamps/`) | {stamps:,} | {mib(stamps)} |")
print(f"| of which other (roots, histories, lock) | {other:,} | {mib(other)} |")
print(f"| unique content of the packages (distinct contents, sizes) | {usrc:,} | {mib(usrc)} |")
print(f"| unique content in the store (`unique_content_bytes`: distinct files incl. converted ones) | {ustore:,} | {mib(ustore)} |")
print(f"| the same distinct contents as this filesystem allocates them (one file each) | {distinct:,} | {mib(distinct)} |")
print(f"| staging roots of the 10 projects (`du`, pointers and links) | {staging:,} | {mib(staging)} |")
print()
print(f"generations: {gens} history entries, {gen_paths} distinct generation store paths (projects with the same inputs share one)")
print(f"store paths: {paths}; directories in the store: {dirs:,}, of them {gen_dirs:,} inside generations, beside {int(gen_links):,} symbolic links (skill directories linked into their package)")
print(f"store / unique package content: {du / usrc:.2f}x; store / unique store content: {du / ustore:.2f}x")
print(f"store / distinct contents as allocated: {du / distinct:.2f}x")
for name, base in (("unique package content", usrc), ("distinct contents as allocated", distinct)):
    over = du - 1.5 * base
    print(f"beyond 1.5x {name}: {over:,.0f} bytes = {over / gen_paths:,.0f} per generation store path = {over / gens:,.0f} per history entry")
EOF
if [[ -n "${AGENTPACK_BENCH_KEEP:-}" ]]; then echo "kept $work"; fi
