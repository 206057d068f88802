#!/usr/bin/env bash
# Run every fuzz target of agentpack-lockfile for a bounded time.
#
#   lockfile/fuzz/run.sh            # 30 s per target
#   lockfile/fuzz/run.sh 120        # 120 s per target
#   lockfile/fuzz/run.sh 30 lock    # only the `lock` target
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). On a stable toolchain the nightly flags
# cargo-fuzz passes are enabled with RUSTC_BOOTSTRAP=1. Seeds come from lockfile/tests/fixtures.
set -euo pipefail

seconds="${1:-30}"
shift || true
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(manifest lock spec)
fi

export RUSTC_BOOTSTRAP=1

seed() {
  local target="$1" dir="corpus/$1"
  mkdir -p "$dir"
  case "$target" in
    lock) cp ../tests/fixtures/*.lock "$dir"/ ;;
    manifest) cp ../tests/fixtures/*.toml "$dir"/ 2>/dev/null || true ;;
    spec)
      printf '%s' 'anthropics/skills/skills/canvas-design' >"$dir/shorthand"
      printf '%s' 'https://github.com/acme/x/tree/main/skills/demo' >"$dir/url"
      printf '%s' 'github.com/acme/monorepo/packages/rules@v1.2.0' >"$dir/module"
      printf '%s' 'package-path:github.com/acme/x:commands/a.md' >"$dir/selector"
      ;;
  esac
}

for target in "${targets[@]}"; do
  seed "$target"
  echo "== fuzzing $target for ${seconds}s"
  cargo fuzz run "$target" "corpus/$target" -- -max_total_time="$seconds" -max_len=8192
done
