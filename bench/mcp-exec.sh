#!/usr/bin/env bash
# Start-up time of an MCP server: the second start through `agentpack mcp-exec` (locked tree,
# already unpacked in the store) vs `npx` of the same package, already in npm's cache.
#
# Everything is local: a throw-away npm registry (python3 http.server over packuments and tarballs
# made here) on 127.0.0.1, a private AGENTPACK_HOME, HOME and npm cache. Needs node, npm, python3
# and an `agentpack` binary with `mcp` and `mcp-exec` (default: target/release/agentpack, built here).
#
# Usage: bench/mcp-exec.sh                 (from the repository root)
#   AGENTPACK_BIN=target/debug/agentpack   the binary to measure
#   AGENTPACK_BENCH_RUNS=20                starts per side
#   AGENTPACK_BENCH_DEPS=30                dependencies of the server package
# Prints a Markdown table; paste it into docs/src/benchmarks-mcp.md with the command line.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${AGENTPACK_BENCH_RUNS:-20}"
deps="${AGENTPACK_BENCH_DEPS:-30}"
bin="${AGENTPACK_BIN:-}"
if [[ -z "$bin" ]]; then
  cargo build --release -p agentpack-cli >&2
  bin="${CARGO_TARGET_DIR:-target}/release/agentpack"
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

work="$(mktemp -d "${TMPDIR:-/tmp}/agentpack-mcp-bench.XXXXXX")"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

export HOME="$work/home" AGENTPACK_HOME="$work/agentpack-home" AGENTPACK_STAGING_ROOT="$work/staging"
export npm_config_cache="$work/npm-cache" npm_config_update_notifier=false npm_config_fund=false
mkdir -p "$HOME" "$work/registry" "$work/project"

# A registry: bench-mcp@1.0.0 depending on $deps small packages, each a real gzip tarball.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
registry="http://127.0.0.1:$port"
python3 - "$work/registry" "$registry" "$deps" <<'PY'
import base64, hashlib, io, json, os, sys, tarfile
root, registry, deps = sys.argv[1], sys.argv[2], int(sys.argv[3])
def publish(name, files, manifest):
    manifest = dict(manifest, name=name, version="1.0.0")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in [("package.json", json.dumps(manifest))] + files:
            data = text.encode()
            info = tarfile.TarInfo("package/" + path); info.size = len(data); info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    tgz = buf.getvalue()
    os.makedirs(os.path.join(root, name, "-"), exist_ok=True)
    with open(os.path.join(root, name, "-", f"{name}-1.0.0.tgz"), "wb") as f:
        f.write(tgz)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()
    doc = dict(manifest, dist={"tarball": f"{registry}/{name}/-/{name}-1.0.0.tgz", "integrity": integrity})
    packument = {"name": name, "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": doc}}
    with open(os.path.join(root, name, "index.json"), "w") as f:
        json.dump(packument, f)
names = [f"bench-dep-{i}" for i in range(deps)]
for n in names:
    publish(n, [("index.js", f"module.exports = '{n}';\n")], {"main": "index.js"})
requires = "".join(f"require('{n}');" for n in names)
publish("bench-mcp", [("cli.js", f"#!/usr/bin/env node\n{requires}console.log('ready');\n")],
        {"bin": {"bench-mcp": "cli.js"}, "dependencies": {n: "^1.0.0" for n in names}})
PY
# http.server serves <name>/index.json for GET /<name>/ only; answer /<name> too.
python3 - "$work/registry" "$port" >/dev/null 2>&1 <<'PY' &
import http.server, os, sys
root, port = sys.argv[1], int(sys.argv[2])
class H(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k): super().__init__(*a, directory=root, **k)
    def translate_path(self, path):
        p = super().translate_path(path)
        return os.path.join(p, "index.json") if os.path.isdir(p) else p
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
server_pid=$!
for _ in $(seq 50); do curl -fs "$registry/bench-mcp" >/dev/null 2>&1 && break; sleep 0.1; done

cd "$work/project"
"$bin" init --name bench >/dev/null 2>&1
"$bin" mcp add bench --command npx --args -y --args bench-mcp@latest \
  --env "npm_config_registry=$registry" --no-sync >/dev/null 2>&1
# The spec sync would stage, made from pack.lock.
python3 - pack.lock "$work/spec.json" <<'PY'
import json, sys, tomllib
lock = tomllib.load(open(sys.argv[1], "rb"))
r = next(s for s in lock["mcp_servers"] if s["name"] == "bench")
tree = [{k: e[k] for k in ("path", "version", "integrity") } for e in r["tree"]]
spec = {"format": 1, "package": r["package"], "version": r["version"], "bin": r["bin"],
        "registry": r["registry"], "tree_digest": r["tree_digest"], "tree": tree}
json.dump(spec, open(sys.argv[2], "w"), indent=2)
PY

time_runs() { # prints the median wall time in ms of $runs runs of "$@"
  local samples=()
  for _ in $(seq "$runs"); do
    local start end
    start=$(date +%s%N); "$@" >/dev/null; end=$(date +%s%N)
    samples+=($(( (end - start) / 1000 )))
  done
  printf '%s\n' "${samples[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

# First starts (download, unpack, cache) outside the measurement.
first_exec=$( { start=$(date +%s%N); "$bin" mcp-exec --spec "$work/spec.json" -- >/dev/null; end=$(date +%s%N); echo $(( (end-start)/1000000 )); } )
npm_config_registry="$registry" npx -y bench-mcp@1.0.0 >/dev/null
exec_ms=$(time_runs "$bin" mcp-exec --spec "$work/spec.json" --)
npx_ms=$(time_runs env npm_config_registry="$registry" npx -y bench-mcp@1.0.0)
tree="$(readlink -f "$AGENTPACK_HOME"/cache/npm-trees/*)"
node_ms=$(time_runs node "$tree/node_modules/bench-mcp/cli.js")

echo "## MCP server start ($(date -u +%Y-%m-%d), $(nproc) cores, node $(node --version), npm $(npm --version))"
echo
echo "A server package with $deps dependencies; median of $runs starts each; the server prints one line and exits."
echo
echo "| start | median |"
echo "| --- | --- |"
echo "| \`agentpack mcp-exec\`, first start (download $((deps + 1)) tarballs, check, unpack, publish) | ${first_exec} ms |"
echo "| \`agentpack mcp-exec\`, later start (cheap check, then node) | ${exec_ms} ms |"
echo "| \`npx -y bench-mcp@1.0.0\`, package already in npm's cache | ${npx_ms} ms |"
echo "| \`node cli.js\` alone, from the unpacked tree (the floor) | ${node_ms} ms |"
