//! Commands that read the workspace's `.agents/` overlay read the workspace's, not the definition
//! root's, when the roots are separate (`--definition-root D --workspace W`, as `--env` and a
//! binding give): `mcp add`/`mcp remove` name `W/.agents/mcp.json`, `extra sync-claude`
//! reconciles `W/.claude/skills` with `W/.agents/skills` (keeping replaced copies in the pair's
//! state directory), and `mode tui` lists `W/.agents/` entries. Through the real binary; the
//! editor in a tmux pane (skipped, saying why, without tmux outside CI).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use agentpack_test_support::{skip, write, IsolatedHome};

/// A definition (`iso.project`, no packages) and a separate checkout beside it.
struct Roots {
    iso: IsolatedHome,
    definition: PathBuf,
    workspace: PathBuf,
}

impl Roots {
    fn new() -> Roots {
        let iso = IsolatedHome::new();
        write(
            &iso.project.join("agentpack.toml"),
            "name = \"team\"\nversion = \"0.1.0\"\n\n[dependencies]\n",
        );
        let workspace = iso.project.parent().unwrap().join("checkout");
        std::fs::create_dir_all(&workspace).unwrap();
        Roots {
            definition: std::fs::canonicalize(&iso.project).unwrap(),
            workspace: std::fs::canonicalize(&workspace).unwrap(),
            iso,
        }
    }

    /// `--definition-root D --workspace W` and `args`.
    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec![
            "--definition-root",
            self.definition.to_str().unwrap(),
            "--workspace",
            self.workspace.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        all
    }

    fn run(&self, args: &[&str]) -> Output {
        self.iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .args(self.args(args))
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let output = self.run(args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        output
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn mcp_names_the_workspace_overlay_that_defines_a_server() {
    let roots = Roots::new();
    let overlay = roots.workspace.join(".agents/mcp.json");
    write(
        &overlay,
        r#"{"mcpServers": {"shadow": {"command": "node", "args": ["overlay.js"]}}}"#,
    );
    let manifest = std::fs::read(roots.definition.join("agentpack.toml")).unwrap();
    let add = roots.run(&["mcp", "add", "shadow", "--command", "node", "--no-sync"]);
    assert!(!add.status.success(), "the overlay's server shadows it");
    let err = stderr(&add);
    assert!(err.contains(&overlay.display().to_string()), "{err}");
    assert_eq!(
        std::fs::read(roots.definition.join("agentpack.toml")).unwrap(),
        manifest,
        "nothing written"
    );
    let remove = roots.run(&["mcp", "remove", "shadow", "--no-sync"]);
    assert!(!remove.status.success());
    let err = stderr(&remove);
    assert!(
        err.contains(&format!("remove it from {}", overlay.display())),
        "{err}"
    );
}

#[test]
fn extra_sync_claude_reconciles_the_workspace() {
    let roots = Roots::new();
    let w = &roots.workspace;
    write(&w.join(".agents/skills/shared/SKILL.md"), "agents side\n");
    write(&w.join(".claude/skills/both/SKILL.md"), "old\n");
    let old = std::time::SystemTime::now() - Duration::from_secs(500);
    std::fs::OpenOptions::new()
        .write(true)
        .open(w.join(".claude/skills/both/SKILL.md"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    write(&w.join(".agents/skills/both/SKILL.md"), "new\n");
    let run = roots.ok(&["--json", "extra", "sync-claude"]);
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(
        std::fs::read_to_string(w.join(".claude/skills/shared/SKILL.md")).unwrap(),
        "agents side\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join(".claude/skills/both/SKILL.md")).unwrap(),
        "new\n"
    );
    assert!(
        !roots.definition.join(".claude").exists(),
        "the definition root is not touched"
    );
    // The replaced copy is kept in the state directory of the (definition, workspace) pair.
    let status = roots.ok(&["env", "status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let state_dir = PathBuf::from(status["state_dir"].as_str().unwrap());
    let kept: Vec<&str> = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|action| action["kept"].as_str())
        .collect();
    assert_eq!(kept.len(), 1, "{report}");
    assert!(
        Path::new(kept[0]).starts_with(state_dir.join("sync-claude")),
        "{kept:?} under {}",
        state_dir.display()
    );
}

#[test]
fn mode_tui_lists_the_workspace_overlay() {
    let roots = Roots::new();
    write(
        &roots.workspace.join(".agents/rules/house.md"),
        "# House rules\n",
    );
    roots.ok(&["sync"]);
    if Command::new("tmux").arg("-V").output().is_err() {
        skip("tmux is not installed (.ci/run installs it), so `mode tui` cannot be driven in a terminal");
        return;
    }
    let command = roots
        .iso
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None);
    let quote = |text: &str| format!("'{}'", text.replace('\'', r"'\''"));
    // The isolated environment only, as `iso.command` gives it.
    let assignments = command.get_envs().filter_map(|(key, value)| {
        let pair = format!("{}={}", key.to_string_lossy(), value?.to_string_lossy());
        Some(quote(&pair))
    });
    let mut words: Vec<String> = ["env", "-i", "TERM=screen"].map(str::to_owned).to_vec();
    words.extend(assignments);
    words.push(quote(&command.get_program().to_string_lossy()));
    words.extend(roots.args(&["mode", "tui"]).iter().map(|word| quote(word)));
    let shell = format!(
        "cd {} && {}",
        quote(&roots.iso.project.to_string_lossy()),
        words.join(" ")
    );
    let socket = format!("agentpack-workspace-overlay-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .env_remove("TMUX")
            .args(["-L", &socket])
            .args(args)
            .output()
            .unwrap()
    };
    let started = tmux(&[
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "-s",
        "tui",
        &shell,
    ]);
    assert!(started.status.success(), "tmux: {}", stderr(&started));
    let deadline = Instant::now() + Duration::from_secs(30);
    let screen = loop {
        let screen = String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "tui"]).stdout)
            .into_owned();
        if screen.contains(".agents  rules/house.md") || Instant::now() > deadline {
            break screen;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    tmux(&["kill-server"]);
    assert!(
        screen.contains(".agents  rules/house.md"),
        "the editor lists the workspace's overlay:\n{screen}"
    );
}
