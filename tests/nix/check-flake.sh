#!/usr/bin/env bash
# Checks flake.nix offline: parse it, then `nix flake check --no-build` with nixpkgs replaced by the stub
# in tests/nix/stub-nixpkgs, then evaluate the home-manager module with the stub's lib.
# Needs `nix` (Debian's nix-bin); .ci/run installs it. Prints what it checked; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export NIX_CONFIG="experimental-features = nix-command flakes
sandbox = false"

nix-instantiate --parse flake.nix >/dev/null
nix-instantiate --parse nix/home-module.nix >/dev/null
echo "flake.nix parses"

# A flake inside a git work tree only sees tracked files; check a copy so uncommitted work counts too.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} "$work/" 2>/dev/null || true
cp -r tests/nix/stub-nixpkgs "$work/stub"
nix flake check --no-build --no-write-lock-file \
  --override-input nixpkgs "path:$work/stub" "path:$work"
echo "nix flake check --no-build passed"

# The home-manager module: enabled with both settings, it installs the package and sets both variables.
result=$(nix eval --impure --json --expr "
  let
    flake = builtins.getFlake \"path:$work\";
    stub = builtins.getFlake \"path:$work/stub\";
    module = import $work/nix/home-module.nix { self = flake; };
    evaluated = module {
      lib = stub.lib;
      pkgs = stub.legacyPackages.x86_64-linux;
      config.programs.agentpack = { enable = true; package = \"pkg\"; home = \"/data/ap\"; stagingRoot = \"/tmp/ap\"; };
    };
  in {
    options = builtins.attrNames evaluated.options.programs.agentpack;
    condition = evaluated.config.condition;
    content = evaluated.config.content;
  }")
expected='{"condition":true,"content":{"home":{"packages":["pkg"],"sessionVariables":{"AGENTPACK_HOME":"/data/ap","AGENTPACK_STAGING_ROOT":"/tmp/ap"}}},"options":["enable","home","package","stagingRoot"]}'
if [ "$result" != "$expected" ]; then
  echo "home-manager module evaluated to:"; echo "$result"; echo "expected:"; echo "$expected"; exit 1
fi
echo "home-manager module sets AGENTPACK_HOME and AGENTPACK_STAGING_ROOT"
