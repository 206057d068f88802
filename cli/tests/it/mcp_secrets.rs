//! Credentials in an MCP server's `url` userinfo and `args` never reach the store, the staging root
//! or the project (issue 12, defect 5), yet every agent still receives them at launch; eject refuses
//! to write them and writes nothing.
//!
//! What is allowed to hold the sentinel afterwards, exactly:
//! * `agentpack.toml`, the user's own definition (the input);
//! * files of the home layers, each of mode 0600 and never under the store
//!   (`$AGENTPACK_HOME/cache/store`): under `$AGENTPACK_HOME/projects/` only (the launcher's
//!   secret record, Grok's `GROK_HOME`, and the `config.toml` of Codex's `CODEX_HOME`, which links
//!   to it from `<staging root>/ap-c/`: nothing under the staging root holds a credential);
//! * the stand-in agents' own records (outside every scanned root).
//!
//! Scanned: `$AGENTPACK_HOME` (store and state), the staging root, the project and `$HOME`.
//! The agents are stand-in scripts named by the `*_PATH` override variables; each records the
//! `AGENTPACK_MCP_*` variables it was given and the `config.toml` of its home layer.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{write, write_executable, IsolatedHome};

const SENTINEL: &str = "s3ntinelQZX";
const URL: &str = "https://mcpuser:pw-s3ntinelQZX-url@mcp.example.com/mcp";
const ARG_KEY: &str = "key-s3ntinelQZX-arg";
const ARG_TOKEN: &str = "--token=tok-s3ntinelQZX";

const STANDIN: &str = r#"#!/bin/sh
out="$STANDIN_RECORD/$(basename "$0").txt"
{
  env | grep '^AGENTPACK_MCP_' | sort | sed 's/^/env:/'
  for d in "$CODEX_HOME" "$GROK_HOME"; do
    if [ -n "$d" ] && [ -f "$d/config.toml" ]; then
      printf 'config:%s\n' "$d/config.toml"
      sed 's/^/toml:/' "$d/config.toml"
    fi
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
"#;

/// The launchers, the binary each runs and its override variable.
const LAUNCHERS: [(&str, &str, &str); 6] = [
    ("claude", "claude", "CLAUDE_PATH"),
    ("cursor-agent", "cursor-agent", "CURSOR_AGENT_PATH"),
    ("opencode", "opencode", "OPENCODE_PATH"),
    ("codex", "codex", "CODEX_PATH"),
    ("grok", "grok", "GROK_PATH"),
    ("agy", "agy", "AGY_PATH"),
];

struct Project {
    iso: IsolatedHome,
    bin: PathBuf,
    record: PathBuf,
}

fn manifest() -> String {
    format!(
        r#"name = "demo"
version = "0.1.0"

[mcp.servers.remote]
type = "http"
url = "{URL}"

[mcp.servers.local]
command = "node"
args = ["server.js", "--api-key", "{ARG_KEY}", "{ARG_TOKEN}", "--port", "8080"]
"#
    )
}

fn setup() -> Project {
    let iso = IsolatedHome::new();
    let root = iso.project.parent().unwrap().to_path_buf();
    let bin = root.join("bin");
    let record = root.join("record");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&record).unwrap();
    for (_, binary, _) in LAUNCHERS {
        let path = bin.join(binary);
        write_executable(&path, STANDIN);
    }
    write(&iso.project.join("agentpack.toml"), &manifest());
    write(&iso.home.join(".codex/config.toml"), "model = \"gpt-5\"\n");
    write(&iso.home.join(".grok/config.toml"), "model = \"grok-4\"\n");
    Project { iso, bin, record }
}

impl Project {
    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = self
            .iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None);
        command.env("STANDIN_RECORD", &self.record).args(args);
        command.envs(env.iter().copied());
        for (_, binary, var) in LAUNCHERS {
            command.env(var, self.bin.join(binary));
        }
        command.output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        self.ok_with(args, &[])
    }

    fn ok_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let output = self.run_with(args, env);
        assert!(
            output.status.success(),
            "agentpack {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        no_sentinel_in_output(args, &output);
        output
    }

    /// The `AGENTPACK_MCP_*` variables and the home layer's `config.toml` a stand-in received.
    fn seen(&self, binary: &str) -> (BTreeMap<String, String>, String, Option<PathBuf>) {
        let text = std::fs::read_to_string(self.record.join(format!("{binary}.txt"))).unwrap();
        let mut env = BTreeMap::new();
        let mut toml = String::new();
        let mut config = None;
        for line in text.lines() {
            if let Some(var) = line.strip_prefix("env:") {
                let (name, value) = var.split_once('=').unwrap();
                env.insert(name.to_string(), value.to_string());
            } else if let Some(line) = line.strip_prefix("toml:") {
                toml.push_str(line);
                toml.push('\n');
            } else if let Some(path) = line.strip_prefix("config:") {
                config = Some(PathBuf::from(path));
            }
        }
        (env, toml, config)
    }

    /// Codex's `CODEX_HOME` (under the staging root, or under the documented fallback
    /// `/var/tmp/ap-c/` when the staging root is too long for Codex's socket, as under a long
    /// `TMPDIR`) holds no credential: its `config.toml` only links to the private copy under
    /// `$AGENTPACK_HOME/projects/`.
    fn assert_codex_home_only_links(&self, config: &Path) {
        assert!(
            config.starts_with(&self.iso.staging_root) || config.starts_with("/var/tmp/ap-c"),
            "{}",
            config.display()
        );
        let target = std::fs::read_link(config).unwrap();
        assert!(
            target.starts_with(self.iso.agentpack_home.join("projects")),
            "{}",
            target.display()
        );
        let held = files_holding(config.parent().unwrap(), SENTINEL);
        assert!(held.is_empty(), "CODEX_HOME holds a credential: {held:?}");
    }

    /// Every file under the scanned roots that holds the sentinel, except the allowed ones; and
    /// each allowed one's mode is checked.
    fn leaks(&self) -> Vec<String> {
        let projects = self.iso.agentpack_home.join("projects");
        let store = self.iso.agentpack_home.join("cache/store");
        let manifest = self.iso.project.join("agentpack.toml");
        let mut found = Vec::new();
        for root in [
            &self.iso.agentpack_home,
            &self.iso.staging_root,
            &self.iso.project,
            &self.iso.home,
        ] {
            for path in files_holding(root, SENTINEL) {
                if path == manifest {
                    continue;
                }
                let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                let home_layer = path.starts_with(&projects);
                if home_layer && !path.starts_with(&store) && mode == 0o600 {
                    continue;
                }
                found.push(format!("{} (mode {mode:o})", path.display()));
            }
        }
        found
    }
}

/// Regular files under `root` (symlinks not followed) whose bytes contain `needle`.
fn files_holding(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes())
                {
                    found.push(path);
                }
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                assert!(
                    !target.to_string_lossy().contains(needle),
                    "{} links to {}",
                    path.display(),
                    target.display()
                );
            }
        }
    }
    found
}

fn no_sentinel_in_output(args: &[&str], output: &Output) {
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains(SENTINEL),
            "agentpack {args:?} printed a credential on {stream}:\n{text}"
        );
    }
}

#[test]
fn credentials_in_url_and_args_reach_the_agents_and_nothing_else() {
    let t = setup();
    t.ok(&["sync"]);
    assert_eq!(t.leaks(), Vec::<String>::new(), "after sync");

    for (launcher, binary, _) in LAUNCHERS {
        t.ok(&[launcher]);
        let (env, toml, config) = t.seen(binary);
        match launcher {
            "codex" | "grok" => {
                // Neither expands variables: the home layer's config.toml (0600) holds the values.
                let config = config.unwrap_or_else(|| panic!("{launcher}: no config.toml"));
                assert!(
                    toml.contains(&format!("url = \"{URL}\"")),
                    "{launcher}: {toml}"
                );
                let args = format!(
                    "args = [\"server.js\", \"--api-key\", \"{ARG_KEY}\", \"{ARG_TOKEN}\", \"--port\", \"8080\"]"
                );
                assert!(toml.contains(&args), "{launcher}: {toml}");
                let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", config.display());
                if launcher == "codex" {
                    t.assert_codex_home_only_links(&config);
                }
            }
            _ => {
                assert_eq!(
                    env.get("AGENTPACK_MCP_REMOTE_URL").map(String::as_str),
                    Some(URL),
                    "{launcher}: {env:?}"
                );
                assert_eq!(
                    env.get("AGENTPACK_MCP_LOCAL_ARG_2").map(String::as_str),
                    Some(ARG_KEY),
                    "{launcher}: {env:?}"
                );
                assert_eq!(
                    env.get("AGENTPACK_MCP_LOCAL_ARG_3").map(String::as_str),
                    Some(ARG_TOKEN),
                    "{launcher}: {env:?}"
                );
                assert!(!env.contains_key("AGENTPACK_MCP_LOCAL_ARG_5"), "{env:?}");
            }
        }
        assert_eq!(
            t.leaks(),
            Vec::<String>::new(),
            "after `agentpack {launcher}`"
        );
    }

    let output = t.run(&["eject"]);
    assert!(!output.status.success(), "eject wrote a credential");
    no_sentinel_in_output(&["eject"], &output);
    assert_eq!(t.leaks(), Vec::<String>::new(), "after eject");
}

/// Credentials the launching environment supplies (an `env` value renamed from another variable,
/// a header template) reach Codex through its config, and pack.lock does not change when a
/// credential in `args` or `url` does: its digests are over the credential-free definition.
#[test]
fn environment_credentials_reach_codex_and_the_lock_ignores_credential_values() {
    let t = setup();
    let manifest = format!(
        r#"{}
[mcp.servers.envd]
command = "node"
args = ["env-server.js"]
env = {{ API_TOKEN = "${{H10_SOURCE_TOKEN}}" }}

[mcp.servers.hdr]
type = "http"
url = "https://mcp.example.com/hdr"
headers = {{ X-Api-Key = "key ${{H10_HEADER_TOKEN}}" }}
"#,
        manifest()
    );
    write(&t.iso.project.join("agentpack.toml"), &manifest);
    let env = [
        ("H10_SOURCE_TOKEN", "env-s3ntinelQZX-token"),
        ("H10_HEADER_TOKEN", "hdr-s3ntinelQZX-token"),
    ];
    t.ok_with(&["sync"], &env);
    assert_eq!(t.leaks(), Vec::<String>::new(), "after sync");
    // The second launch takes the fast path (nothing changed since the first).
    for round in 0..2 {
        t.ok_with(&["codex"], &env);
        let (_, toml, config) = t.seen("codex");
        let parsed: toml::Table = toml.parse().unwrap();
        let servers = parsed["mcp_servers"].as_table().unwrap();
        assert_eq!(
            servers["envd"]["env"]["API_TOKEN"].as_str(),
            Some("env-s3ntinelQZX-token"),
            "round {round}: {toml}"
        );
        assert_eq!(
            servers["hdr"]["http_headers"]["X-Api-Key"].as_str(),
            Some("key hdr-s3ntinelQZX-token"),
            "round {round}: {toml}"
        );
        t.assert_codex_home_only_links(&config.unwrap());
        assert_eq!(t.leaks(), Vec::<String>::new(), "after launch {round}");
    }

    t.ok_with(&["lock"], &env);
    let before = std::fs::read(t.iso.project.join("pack.lock")).unwrap();
    let rotated = manifest
        .replace("pw-s3ntinelQZX-url", "pw-rotated-url")
        .replace(ARG_KEY, "key-rotated-arg");
    assert_ne!(rotated, manifest);
    write(&t.iso.project.join("agentpack.toml"), &rotated);
    t.ok_with(&["lock"], &env);
    let after = std::fs::read(t.iso.project.join("pack.lock")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&before),
        String::from_utf8_lossy(&after),
        "a rotated credential changed pack.lock"
    );
    // What is not a credential still moves the digest.
    write(
        &t.iso.project.join("agentpack.toml"),
        &rotated.replace("\"8080\"", "\"8081\""),
    );
    t.ok_with(&["lock"], &env);
    let moved = std::fs::read(t.iso.project.join("pack.lock")).unwrap();
    assert_ne!(after, moved);
}

#[test]
fn staged_configs_reference_the_credentials_by_variable() {
    let t = setup();
    t.ok(&["sync"]);
    let generation = std::fs::canonicalize(t.iso.staging_root.join("modes/default")).unwrap();
    let claude: serde_json::Value = serde_json::from_slice(
        &std::fs::read(generation.join("plugins/agentpack-bundle/.mcp.json")).unwrap(),
    )
    .unwrap();
    let servers = &claude["mcpServers"];
    assert_eq!(servers["remote"]["url"], "${AGENTPACK_MCP_REMOTE_URL}");
    assert_eq!(
        servers["local"]["args"],
        serde_json::json!([
            "server.js",
            "--api-key",
            "${AGENTPACK_MCP_LOCAL_ARG_2}",
            "${AGENTPACK_MCP_LOCAL_ARG_3}",
            "--port",
            "8080"
        ])
    );
    // `mcp list` shows the definitions with the credentials masked.
    let list = t.ok(&["mcp", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("https://***@mcp.example.com/mcp"), "{text}");
    assert!(text.contains("--api-key *** ***"), "{text}");
}

#[test]
fn eject_refuses_credentials_names_server_and_field_and_writes_nothing() {
    let t = setup();
    t.ok(&["sync"]);
    let before = project_files(&t.iso.project);
    let output = t.run(&["eject", "claude", "codex"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    no_sentinel_in_output(&["eject"], &output);
    assert!(stderr.contains("eject wrote nothing"), "{stderr}");
    assert!(
        stderr.contains("MCP server `remote`: its `url` carries credentials"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("MCP server `local`: `args[2]` (the value of --api-key) holds a credential"),
        "{stderr}"
    );
    assert!(
        stderr.contains("MCP server `local`: `args[3]` holds a credential"),
        "{stderr}"
    );
    assert!(stderr.contains("${"), "says how to pass it: {stderr}");
    for path in [".mcp.json", ".codex/config.toml", ".agentpack/eject"] {
        assert!(!t.iso.project.join(path).exists(), "{path} was written");
    }
    assert_eq!(project_files(&t.iso.project), before);

    // With references instead, eject goes ahead and writes references only.
    let manifest = manifest()
        .replace(
            URL,
            "https://${MCP_USER}:${MCP_PASSWORD}@mcp.example.com/mcp",
        )
        .replace(ARG_KEY, "${API_KEY}")
        .replace(ARG_TOKEN, "--token=${TOKEN}");
    write(&t.iso.project.join("agentpack.toml"), &manifest);
    t.ok(&["eject", "claude"]);
    let ejected = std::fs::read_to_string(t.iso.project.join(".mcp.json")).unwrap();
    assert!(ejected.contains("${MCP_PASSWORD}"), "{ejected}");
    assert!(ejected.contains("${API_KEY}"), "{ejected}");
}

/// Every file of the project with its bytes (agentpack's own `.agentpack/` state included).
fn project_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let key = path.strip_prefix(root).unwrap().display().to_string();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                out.insert(key, std::fs::read(&path).unwrap());
            } else {
                out.insert(
                    key,
                    std::fs::read_link(&path)
                        .unwrap()
                        .display()
                        .to_string()
                        .into_bytes(),
                );
            }
        }
    }
    out
}

#[test]
fn messages_never_show_a_credential() {
    let t = setup();
    let spec = format!("https://deploy:{SENTINEL}@gitlab.example.com/o/r");
    let output = t.run(&["add", &spec]);
    assert!(!output.status.success());
    no_sentinel_in_output(&["add"], &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("***@gitlab.example.com"), "{stderr}");

    let url = format!("https://bot:{SENTINEL}@other.example.com/mcp");
    t.ok(&["mcp", "add", "other", "--type", "http", "--url", &url]);
    t.ok(&["mcp", "list", "--json"]);
    t.ok(&["mcp", "list"]);
    assert_eq!(t.leaks(), Vec::<String>::new(), "after mcp add");
}

/// The pinned Codex (0.171.0), launched through `agentpack codex`, reads the credentials through
/// the link from its `CODEX_HOME` (under the staging root) to the private config: `codex mcp get`
/// shows the environment's token and the argument, and nothing under the staging root, the store
/// or the project holds them. Skipped without `AGENTPACK_TEST_AGENTS_BIN`.
#[test]
fn the_real_codex_gets_the_credentials_through_its_private_config() {
    let Some(agents) = agentpack_test_support::agents_bin() else {
        return;
    };
    let t = setup();
    let manifest = format!(
        r#"{}
[mcp.servers.envd]
command = "node"
args = ["env-server.js"]
env = {{ API_TOKEN = "${{H10_SOURCE_TOKEN}}" }}
"#,
        manifest()
    );
    write(&t.iso.project.join("agentpack.toml"), &manifest);
    let path = format!(
        "{}:{}",
        agents.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let get = |server: &str| -> serde_json::Value {
        let output = t
            .iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .env("PATH", &path)
            .env("H10_SOURCE_TOKEN", "env-s3ntinelQZX-token")
            .args(["codex", "mcp", "get", server, "--json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let envd = get("envd");
    assert_eq!(
        envd["transport"]["env"]["API_TOKEN"], "env-s3ntinelQZX-token",
        "{envd}"
    );
    let local = get("local");
    assert_eq!(local["transport"]["args"][2], ARG_KEY, "{local}");
    assert_eq!(t.leaks(), Vec::<String>::new(), "after `agentpack codex`");
}
