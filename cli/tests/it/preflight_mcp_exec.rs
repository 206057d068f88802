//! The staged-tree freshness check covers tree-locked npm MCP servers: a synced project whose
//! server starts through `agentpack mcp-exec --spec <store path>` preflights clean (the plan
//! renders the same wrapper staging wrote), and a staged config whose wrapper no longer matches
//! the lock is `STAGING_STALE`. The real binary against an npm registry on 127.0.0.1 (real npm);
//! every preflight changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{agentpack_bin, IsolatedHome, NpmPackage, NpmRegistry};

use crate::preflight::unchanged;
use serde_json::{json, Value};

struct World {
    home: IsolatedHome,
    registry: NpmRegistry,
}

impl World {
    /// A project with the tree-locked npm server `demo`, synced.
    fn synced() -> Self {
        let registry = NpmRegistry::start();
        registry.publish(
            NpmPackage::new("@demo/mcp", "1.1.0")
                .bin_script("demo-mcp", "#!/usr/bin/env node\nconsole.log('demo');\n"),
        );
        let world = Self {
            home: IsolatedHome::new(),
            registry,
        };
        world.ok(&["init", "--name", "demo"]);
        world.ok(&[
            "mcp",
            "add",
            "demo",
            "--command",
            "npx",
            "--args",
            "-y",
            "--args",
            "@demo/mcp@latest",
        ]);
        world
    }

    fn run(&self, args: &[&str]) -> Output {
        self.home
            .command(&agentpack_bin(), None)
            .env("npm_config_registry", self.registry.url())
            .args(args)
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "agentpack {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `preflight --agent claude --json`, asserting it changed nothing: codes and report.
    fn preflight(&self) -> (i32, Vec<String>, Value) {
        let output = unchanged(&self.home, &[], || {
            self.run(&["preflight", "--agent", "claude", "--json"])
        });
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("no JSON ({e}): {}", String::from_utf8_lossy(&output.stderr))
        });
        let codes = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_owned())
            .collect();
        (output.status.code().unwrap(), codes, report)
    }
}

/// The staged config file that starts `demo` through `mcp-exec`, and its parsed JSON.
fn staged_config(generation: &Path) -> (PathBuf, Value) {
    let mut pending = vec![generation.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && path.extension().is_some_and(|e| e == "json") {
                let Ok(value) = serde_json::from_slice::<Value>(&std::fs::read(&path).unwrap())
                else {
                    continue;
                };
                let args = &value["mcpServers"]["demo"]["args"];
                if args
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == "mcp-exec"))
                {
                    return (path, value);
                }
            }
        }
    }
    panic!("no staged config starts demo through mcp-exec");
}

#[test]
fn a_tree_locked_server_preflights_clean_and_a_changed_wrapper_is_stale() {
    let world = World::synced();
    // The clean control: what staging wrote is what the current inputs plan.
    let (code, codes, report) = world.preflight();
    assert_eq!(code, 0, "{report:#}");
    assert!(
        !codes.contains(&"STAGING_STALE".to_owned()),
        "a synced tree-locked server is not stale: {report:#}"
    );
    assert!(!codes.iter().any(|c| c.starts_with("MCP_")), "{report:#}");
    assert!(report["plan"]["mcp_servers"]
        .as_array()
        .unwrap()
        .contains(&json!("demo")));

    // The fault: the staged wrapper starts another spec than the lock's.
    let generation = std::fs::canonicalize(world.home.staging_root.join("modes/default")).unwrap();
    let (config, mut value) = staged_config(&generation);
    let args = value["mcpServers"]["demo"]["args"].as_array_mut().unwrap();
    let spec = args.iter().position(|a| a == "--spec").unwrap() + 1;
    args[spec] = json!("/elsewhere/mcp-exec.json");
    // Staged files are read-only; this test owns the whole store.
    let original = std::fs::read(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    std::fs::write(&config, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o444)).unwrap();
    let (code, codes, report) = world.preflight();
    assert_eq!(code, 0, "a stale tree is a warning: {report:#}");
    assert!(codes.contains(&"STAGING_STALE".to_owned()), "{report:#}");
    let stale = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "STAGING_STALE")
        .unwrap();
    let relative = config
        .strip_prefix(&generation)
        .unwrap()
        .display()
        .to_string();
    assert!(
        stale["message"].as_str().unwrap().contains(&relative),
        "names the config: {stale}"
    );
    // Put back, it is clean again.
    std::fs::remove_file(&config).unwrap();
    std::fs::write(&config, original).unwrap();
    let (_, codes, report) = world.preflight();
    assert!(!codes.contains(&"STAGING_STALE".to_owned()), "{report:#}");
}
