//! `agentpack mcp add|remove|list` and `agentpack mcp-exec` end to end: the real binary against an
//! npm registry served on 127.0.0.1, with real npm and node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Output;

use agentpack_builders::npm::ExecSpec;
use agentpack_lockfile::Lockfile;
use agentpack_test_support::{
    agentpack_bin, npm_registry::unreachable_registry_url, write, IsolatedHome, NpmPackage,
    NpmRegistry,
};
use serde_json::{json, Value};

struct World {
    home: IsolatedHome,
    registry: NpmRegistry,
}

impl World {
    fn new() -> Self {
        let registry = NpmRegistry::start();
        registry.publish(NpmPackage::new("dep-b", "1.0.0").file(
            "index.js",
            "module.exports = 'dep-b';\n",
            false,
        ));
        let world = Self {
            home: IsolatedHome::new(),
            registry,
        };
        let marker = world.marker();
        world.registry.publish(
            NpmPackage::new("@demo/mcp", "1.1.0")
                .dependency("dep-b", "^1.0.0")
                .field("bin", json!({"demo-mcp": "cli.js"}))
                .field(
                    "scripts",
                    json!({"postinstall": format!("node -e \"require('fs').writeFileSync('{}', 'x')\"", marker.display())}),
                )
                .file(
                    "cli.js",
                    "#!/usr/bin/env node\nconsole.log(JSON.stringify({argv: process.argv.slice(2), b: require('dep-b')}));\n",
                    true,
                ),
        );
        world.ok(&["init", "--name", "demo"]);
        world
    }

    fn marker(&self) -> PathBuf {
        self.home.home.join("postinstall-ran")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.home
            .command(&agentpack_bin(), None)
            .args(args)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "agentpack {args:?} failed\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn files(&self) -> (String, String) {
        (
            std::fs::read_to_string(self.home.project.join("agentpack.toml")).unwrap(),
            std::fs::read_to_string(self.home.project.join("pack.lock")).unwrap(),
        )
    }

    fn lock(&self) -> Lockfile {
        Lockfile::load(&self.home.project.join("pack.lock")).unwrap()
    }

    fn add_demo(&self, extra: &[&str]) -> Output {
        let registry_env = format!("npm_config_registry={}", self.registry.url());
        let mut args = vec![
            "mcp",
            "add",
            "demo",
            "--command",
            "npx",
            "--args",
            "-y",
            "--args",
            "@demo/mcp@latest",
            "--env",
            &registry_env,
            "--env",
            "API_TOKEN=sk-secret-value",
        ];
        args.extend_from_slice(extra);
        self.run(&args)
    }
}

#[test]
fn mcp_add_pins_latest_locks_the_tree_and_list_shows_it() {
    let w = World::new();
    let out = w.add_demo(&["--no-sync"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (manifest, lock_text) = w.files();
    assert!(manifest.contains("@demo/mcp@latest"), "{manifest}");
    assert!(lock_text.starts_with("lockfile_version = 4"), "{lock_text}");
    assert!(!lock_text.contains("sk-secret-value") && !lock_text.contains("API_TOKEN"));
    let lock = w.lock();
    let record = lock.mcp_server("demo").unwrap();
    assert_eq!(record.version.as_deref(), Some("1.1.0"));
    assert_eq!(record.tree.len(), 2);
    assert!(!w.marker().exists(), "a package script ran");

    let listed = w.ok(&["mcp", "list", "--json"]);
    let value: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let server = &value["servers"][0];
    assert_eq!(server["name"], "demo");
    assert_eq!(server["source"], "manifest");
    assert_eq!(server["lock"], "current");
    assert_eq!(server["record"]["status"], "pinned");
    assert_eq!(server["record"]["version"], "1.1.0");
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("sk-secret-value"));
    let text = w.ok(&["mcp", "list"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("npx -y @demo/mcp@latest"), "{text}");
    assert!(
        text.contains("pinned @demo/mcp@1.1.0, 2 packages locked"),
        "{text}"
    );

    w.ok(&["mcp", "remove", "demo", "--no-sync"]);
    let (manifest, _) = w.files();
    assert!(!manifest.contains("@demo/mcp"), "{manifest}");
    assert!(w.lock().mcp_servers.is_empty());
}

#[test]
fn mcp_add_with_an_unreachable_registry_fails_and_writes_nothing() {
    let w = World::new();
    let before = w.files();
    let registry_env = format!("npm_config_registry={}", unreachable_registry_url());
    let args = [
        "mcp",
        "add",
        "pw",
        "--command",
        "npx",
        "--args",
        "@demo/mcp@latest",
        "--env",
        &registry_env,
        "--no-sync",
    ];
    let out = w.run(&args);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot be reached"), "{stderr}");
    assert!(stderr.contains("--allow-unpinned"), "{stderr}");
    assert_eq!(w.files(), before, "nothing written");

    let mut allowed = args.to_vec();
    allowed.push("--allow-unpinned");
    w.ok(&allowed);
    let lock = w.lock();
    let record = lock.mcp_server("pw").unwrap();
    assert_eq!(record.status.as_str(), "unpinned");
    assert!(record.allow_unpinned);
    let (_, text) = w.files();
    assert!(text.contains("allow_unpinned = true"), "{text}");
}

#[test]
fn mcp_exec_runs_the_locked_tree_and_refuses_a_corrupted_tarball() {
    let w = World::new();
    assert!(w.add_demo(&["--no-sync"]).status.success());
    let spec = ExecSpec::from_record(w.lock().mcp_server("demo").unwrap()).unwrap();
    let spec_path = w.home.home.join("demo.json");
    std::fs::write(&spec_path, spec.to_bytes()).unwrap();
    let spec_arg = spec_path.display().to_string();

    w.registry.corrupt_tarball("dep-b", "1.0.0");
    let out = w.run(&["mcp-exec", "--spec", &spec_arg, "--", "--flag"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not match the integrity"), "{stderr}");
    assert!(!w.home.agentpack_home.join("cache/npm-trees").exists());

    w.registry.restore_tarball("dep-b", "1.0.0");
    for _ in 0..2 {
        let out = w.ok(&["mcp-exec", "--spec", &spec_arg, "--", "--flag", "two words"]);
        let value: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            value,
            json!({"argv": ["--flag", "two words"], "b": "dep-b"})
        );
    }
    assert_eq!(
        w.registry.tarball_requests(),
        2 + 2,
        "one corrupted try, one download"
    );
    assert!(!w.marker().exists(), "a package script ran");
}

#[test]
fn mcp_add_and_remove_sync_unless_told_not_to() {
    let w = World::new();
    w.ok(&[
        "mcp",
        "add",
        "local",
        "--command",
        "node",
        "--args",
        "server.js",
    ]);
    let lock = w.lock();
    let record = lock.mcp_server("local").unwrap();
    assert_eq!(record.status.as_str(), "unpinnable");
    assert_eq!(record.command.as_deref(), Some("node"));
    assert!(
        w.home.staging_root.join("modes").exists(),
        "mcp add did not sync"
    );
    w.ok(&["mcp", "remove", "local"]);
    assert!(w.lock().mcp_servers.is_empty());
    let out = w.run(&["mcp", "remove", "local"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("agentpack mcp list"));
}

#[test]
fn lock_pins_manifest_servers_and_fails_or_records_unpinned_when_the_registry_is_down() {
    let world = World::new();
    let registry = world.registry.url();
    let manifest = format!(
        "name = \"demo\"\nversion = \"0.0.1\"\n\n[dependencies]\n\n[mcp.servers.demo]\ncommand = \"npx\"\nargs = [\"-y\", \"@demo/mcp@latest\"]\nenv = {{ npm_config_registry = \"{registry}\" }}\n"
    );
    std::fs::write(world.home.project.join("agentpack.toml"), &manifest).unwrap();
    world.ok(&["lock"]);
    let (_, lock) = world.files();
    assert!(
        lock.contains("name = \"demo\"") && lock.contains("status = \"pinned\""),
        "{lock}"
    );
    assert!(lock.contains("version = \"1.1.0\""), "{lock}");
    assert!(
        lock.contains("[[mcp_servers.tree]]") && lock.starts_with("lockfile_version = 4"),
        "{lock}"
    );
    assert!(
        !lock.contains(&registry.replace("http://", "npm_config_registry = \"http://")),
        "env values never reach the lock"
    );

    // The same server against a registry nothing listens on: lock fails and writes nothing ...
    let down = manifest
        .replace(&registry, &unreachable_registry_url())
        .replace("[mcp.servers.demo]", "[mcp.servers.other]");
    std::fs::write(world.home.project.join("agentpack.toml"), &down).unwrap();
    let before = world.files();
    let output = world.run(&["lock"]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("other"),
        "the error names the server"
    );
    assert_eq!(world.files(), before, "nothing written");
    // ... unless told to record it unpinned.
    world.ok(&["lock", "--allow-unpinned-mcp"]);
    let (_, lock) = world.files();
    assert!(
        lock.contains("name = \"other\"") && lock.contains("status = \"unpinned\""),
        "{lock}"
    );
    assert!(lock.contains("allow_unpinned = true"), "{lock}");
}

fn json_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            json_files(&entry.path(), out);
        } else if kind.is_file() && entry.file_name().to_string_lossy().ends_with(".json") {
            out.push(entry.path());
        }
    }
}

/// The `--spec` argument of the first staged config that starts `server` through `mcp-exec`.
fn staged_spec(w: &World, server: &str) -> String {
    let mut files = Vec::new();
    json_files(&selected_generation(w), &mut files);
    for file in files {
        let Ok(value) = serde_json::from_slice::<Value>(&std::fs::read(&file).unwrap()) else {
            continue;
        };
        if let Some(args) = value["mcpServers"][server]["args"].as_array() {
            if let Some(i) = args.iter().position(|a| a == "--spec") {
                return args[i + 1].as_str().unwrap().to_owned();
            }
        }
    }
    panic!("no staged config starts `{server}` through mcp-exec");
}

fn selected_generation(w: &World) -> PathBuf {
    std::fs::canonicalize(w.home.staging_root.join("modes/default")).unwrap()
}

#[test]
fn gc_keeps_the_tree_a_synced_generation_starts_and_the_generation_does_not_change() {
    let w = World::new();
    let out = w.add_demo(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spec = staged_spec(&w, "demo");
    let before = selected_generation(&w);

    let first = w.ok(&["mcp-exec", "--spec", &spec, "--", "one"]);
    let value: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(value["argv"], json!(["one"]));
    w.ok(&["sync"]);
    assert_eq!(
        selected_generation(&w),
        before,
        "a sync with unchanged inputs built another generation after the first start"
    );
    assert_eq!(staged_spec(&w, "demo"), spec);

    w.ok(&["gc"]);
    let World { home, registry } = w;
    let downloads = registry.tarball_requests();
    drop(registry);
    let again = home
        .command(&agentpack_bin(), None)
        .args(["mcp-exec", "--spec", &spec, "--", "two"])
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "the second start needed the registry after gc:\n{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let value: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(value["argv"], json!(["two"]));
    assert_eq!(downloads, 2, "one download of each tarball");
}

/// A project with a path package `pkg` whose `.mcp.json` defines `pkglocal`, and a manifest
/// server `py` that PyPI runs (recorded unpinned: `lock` cannot change it).
fn with_package_server(w: &World) {
    let project = &w.home.project;
    write(
        &project.join("pkg/skills/tool/SKILL.md"),
        "---\nname: tool\ndescription: A skill so the package has content.\n---\nUse the tool.\n",
    );
    write(
        &project.join("pkg/.mcp.json"),
        r#"{"mcpServers": {"pkglocal": {"command": "node", "args": ["server.js"]}}}"#,
    );
    write(
        &project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.0.1\"\n\n[dependencies]\n\"pkg\" = { path = \"pkg\" }\n\n[mcp.servers.py]\ncommand = \"uvx\"\nargs = [\"mcp-x\"]\n",
    );
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn mcp_list_shows_package_servers_with_their_definition_and_a_status_against_it() {
    let w = World::new();
    with_package_server(&w);
    w.ok(&["lock"]);
    let lock = w.lock();
    assert_eq!(
        lock.mcp_server("pkglocal").unwrap().status.as_str(),
        "unpinnable"
    );
    assert_eq!(lock.mcp_server("py").unwrap().status.as_str(), "unpinned");
    let synced = w.ok(&["sync"]);
    let warned = stderr_of(&synced);
    assert!(
        !warned.contains("agentpack lock"),
        "a server `lock` cannot change is not advice for `lock`:\n{warned}"
    );

    // The package's server is edited, and it brings a new one; sync does not record servers.
    write(
        &w.home.project.join("pkg/.mcp.json"),
        r#"{"mcpServers": {"pkglocal": {"command": "node", "args": ["server.js", "--v2"]}, "pkgnew": {"command": "node", "args": ["new.js"]}}}"#,
    );
    let synced = w.ok(&["sync"]);
    let warned = stderr_of(&synced);
    assert!(
        warned.contains("pkglocal (edited since it was locked)")
            && warned.contains("pkgnew (no record)"),
        "{warned}"
    );
    assert!(!warned.contains("py ("), "{warned}");

    let listed = w.ok(&["mcp", "list", "--json"]);
    let value: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert!(value["schema_version"].is_number(), "{value}");
    assert!(value["features"].is_array(), "{value}");
    let by = |name: &str| {
        value["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("`{name}` is not listed: {value}"))
            .clone()
    };
    let edited = by("pkglocal");
    assert_eq!(edited["source"], "plugin");
    assert_eq!(edited["module"], "pkg");
    assert_eq!(edited["command"], "node");
    assert_eq!(edited["args"], json!(["server.js", "--v2"]));
    assert_eq!(edited["lock"], "stale");
    assert_eq!(edited["record"]["status"], "unpinnable");
    let new = by("pkgnew");
    assert_eq!(new["source"], "plugin");
    assert_eq!(new["lock"], "none");
    assert!(new["record"].is_null());
    let py = by("py");
    assert_eq!(py["source"], "manifest");
    assert_eq!(py["lock"], "unpinned");

    let text = w.ok(&["mcp", "list"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("pkglocal  [plugin: pkg]"), "{text}");
    assert!(text.contains("node server.js --v2"), "{text}");
    assert!(text.contains("pkgnew  [plugin: pkg]"), "{text}");
    assert!(!text.contains("defined in the package"), "{text}");
}

#[test]
fn mcp_add_refuses_a_name_the_overlay_defines_and_remove_says_where_a_server_is_defined() {
    let w = World::new();
    with_package_server(&w);
    w.ok(&["lock"]);
    write(
        &w.home.project.join(".agents/mcp.json"),
        r#"{"mcpServers": {"shadow": {"command": "node", "args": ["overlay.js"]}}}"#,
    );
    w.ok(&["sync"]);
    let before = w.files();
    let out = w.run(&[
        "mcp",
        "add",
        "shadow",
        "--command",
        "node",
        "--args",
        "mine.js",
        "--no-sync",
    ]);
    assert!(!out.status.success());
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(".agents/mcp.json") && stderr.contains("another name"),
        "{stderr}"
    );
    assert_eq!(w.files(), before, "nothing written");

    // A package's server of the same name is overridden by the manifest, and `add` says so.
    let out = w.ok(&[
        "mcp",
        "add",
        "pkglocal",
        "--command",
        "node",
        "--args",
        "mine.js",
        "--no-sync",
    ]);
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("overrides the MCP server of the same name in package pkg"),
        "{stderr}"
    );
    w.ok(&["mcp", "remove", "pkglocal", "--no-sync"]);

    let out = w.run(&["mcp", "remove", "shadow", "--no-sync"]);
    assert!(!out.status.success());
    let stderr = stderr_of(&out);
    assert!(stderr.contains("defined in .agents/mcp.json"), "{stderr}");
    let out = w.run(&["mcp", "remove", "pkglocal", "--no-sync"]);
    assert!(!out.status.success());
    let stderr = stderr_of(&out);
    assert!(stderr.contains("package pkg defines it"), "{stderr}");
    assert_eq!(w.files().0, before.0);
}
