//! `agentpack mode tui` through a real terminal: the real binary runs in a tmux pane, keys go in
//! with `send-keys`, the screen comes back with `capture-pane`. A project with two local path
//! packages: create a mode, disable a package in it, save, quit; the manifest diff is exactly
//! that edit, comments kept. Also: quitting with unsaved edits asks and writes nothing, and
//! without a terminal the editor refuses and writes nothing.
//!
//! tmux is required under `CI=true`; elsewhere the tmux tests skip, saying why, when it is absent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentpack_test_support::{skip, IsolatedHome, Run};

const TMUX: &str = "tmux";

struct Project {
    home: IsolatedHome,
    /// The module IDs `add` gave the two packages, sorted (the editor lists packages sorted).
    modules: Vec<String>,
}

impl Project {
    /// Two local path packages (a skill and a plugin), synced, with comments in the manifest.
    fn synced() -> Self {
        let home = IsolatedHome::new();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let mut project = Self {
            home,
            modules: Vec::new(),
        };
        project.ok(&["init", "--name", "tui"]);
        for example in ["hello-skill", "review-plugin"] {
            project.ok(&["add", examples.join(example).to_str().unwrap(), "--no-sync"]);
        }
        project.ok(&["sync"]);
        let text = project.manifest();
        let mut commented = String::from("# The tui test project.\n");
        for line in text.lines() {
            commented.push_str(line);
            if line.starts_with("name = ") {
                commented.push_str("   # keep this name");
            }
            commented.push('\n');
            if line == "[dependencies]" {
                commented.push_str("# two local packages\n");
            }
        }
        // Added after the sync, so no MCP record is needed for it: the editor only reads.
        commented.push_str("\n[mcp.servers.filesystem]\ncommand = \"uvx\"\nargs = [\"mcp-fs\"]\n");
        commented.push_str("\n# Modes\n[modes.default]\nbase = \"all\" # everything\n");
        let rules = project.home.project.join(".agents/rules");
        std::fs::create_dir_all(&rules).unwrap();
        std::fs::write(rules.join("house.md"), "# House rules\n\nBe kind.\n").unwrap();
        std::fs::write(project.manifest_path(), &commented).unwrap();
        let mut in_deps = false;
        for line in commented.lines() {
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
            } else if in_deps && line.contains('=') {
                let key = line.split('=').next().unwrap().trim().trim_matches('"');
                project.modules.push(key.to_owned());
            }
        }
        project.modules.sort();
        assert_eq!(project.modules.len(), 2, "{commented}");
        project
    }

    fn manifest_path(&self) -> PathBuf {
        self.home.project.join("agentpack.toml")
    }

    fn manifest(&self) -> String {
        std::fs::read_to_string(self.manifest_path()).unwrap()
    }

    fn bin() -> PathBuf {
        assert_cmd::cargo::cargo_bin("agentpack")
    }

    fn run(&self, args: &[&str]) -> Output {
        self.home
            .command(&Self::bin(), None)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        Run::new(args, self.run(args)).assert_ok().text()
    }

    /// The shell command that runs `agentpack mode tui` with the isolated environment and records
    /// its exit code in `exit_file`.
    fn tui_command(&self, exit_file: &Path) -> String {
        let command = self.home.command(&Self::bin(), None);
        let mut words = vec!["env".to_owned(), "-i".to_owned(), "TERM=screen".to_owned()];
        for (key, value) in command.get_envs() {
            if let Some(value) = value {
                words.push(quote(&format!(
                    "{}={}",
                    key.to_string_lossy(),
                    value.to_string_lossy()
                )));
            }
        }
        words.push(quote(&Self::bin().to_string_lossy()));
        words.push("mode".to_owned());
        words.push("tui".to_owned());
        format!(
            "cd {} && {}; echo $? > {}",
            quote(&self.home.project.to_string_lossy()),
            words.join(" "),
            quote(&exit_file.to_string_lossy())
        )
    }
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// One private tmux server; killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server running `shell_command` in a detached 120x40 session, or `None` (after saying why)
    /// when tmux is not installed and this is not CI.
    fn start(shell_command: &str) -> Option<Self> {
        if Command::new(TMUX).arg("-V").output().is_err() {
            skip("tmux is not installed (.ci/run installs it), so `mode tui` cannot be driven in a terminal");
            return None;
        }
        let socket = format!(
            "agentpack-mode-tui-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let tmux = Self { socket };
        let status = tmux
            .command()
            .args(["new-session", "-d", "-x", "120", "-y", "40", "-s", "tui"])
            .arg(shell_command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        Some(tmux)
    }

    fn command(&self) -> Command {
        let mut command = Command::new(TMUX);
        command.env_remove("TMUX").args(["-L", &self.socket]);
        command
    }

    fn screen(&self) -> String {
        let output = self
            .command()
            .args(["capture-pane", "-p", "-t", "tui"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits (bounded) until the screen shows `needle`; returns the screen.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {needle:?}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends keys (tmux key names, or literal text with `-l`).
    fn keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .args(["send-keys", "-t", "tui"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success(), "tmux send-keys {keys:?} failed");
    }

    fn text(&self, text: &str) {
        let status = self
            .command()
            .args(["send-keys", "-t", "tui", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server may be gone already (it exits with its last session).
        let _ = self
            .command()
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}

/// Waits (bounded) for the editor to exit; returns its exit code.
fn wait_exit(exit_file: &Path, tmux: &Tmux) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(exit_file) {
            if text.ends_with('\n') {
                return text.trim().parse().unwrap();
            }
        }
        assert!(
            Instant::now() < deadline,
            "agentpack mode tui did not exit; the screen shows:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The lines of `after` that are not in `before` and the other way round (a line diff good
/// enough for one added table).
fn diff(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
    let mut removed: Vec<String> = before.lines().map(str::to_owned).collect();
    let mut added = Vec::new();
    for line in after.lines() {
        if let Some(at) = removed.iter().position(|l| l == line) {
            removed.remove(at);
        } else {
            added.push(line.to_owned());
        }
    }
    (added, removed)
}

#[test]
fn create_a_mode_disable_a_package_save_and_quit() {
    let project = Project::synced();
    let before = project.manifest();
    let exit_file = project.home.project.join("../tui-exit");
    let Some(tmux) = Tmux::start(&project.tui_command(&exit_file)) else {
        return;
    };
    let screen = tmux.wait_for("Staged by mode default");
    assert!(
        screen.contains("s save"),
        "the key help is shown:\n{screen}"
    );
    // What the default mode stages, per agent, from the render plan.
    let screen = tmux.wait_for("claude");
    assert!(screen.contains("1 skill: hello-skill"), "{screen}");
    assert!(screen.contains("1 command: review"), "{screen}");
    // Every kind of selector has its rows.
    for row in [
        "[x] package  hello-skill",
        "[x] path  commands/review.md",
        "[x] mcp      filesystem  (agentpack.toml)",
        "[x] .agents  rules/house.md",
    ] {
        assert!(screen.contains(row), "{row:?} shown:\n{screen}");
    }

    tmux.keys(&["n"]);
    tmux.wait_for("New mode name:");
    tmux.text("lean");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Created mode `lean`");
    tmux.wait_for("Mode lean · base all");
    // The first row of the selector list is the first package (sorted).
    let first = &project.modules[0];
    tmux.keys(&["Tab", "Space"]);
    let screen = tmux.wait_for(&format!("Mode `lean` disables package:{first}"));
    assert!(screen.contains("[modified]"), "{screen}");
    tmux.keys(&["s"]);
    tmux.wait_for("Saved agentpack.toml");
    tmux.keys(&["q"]);
    assert_eq!(wait_exit(&exit_file, &tmux), 0);

    let after = project.manifest();
    let (added, removed) = diff(&before, &after);
    assert!(removed.is_empty(), "nothing removed:\n{after}");
    let added: Vec<&str> = added
        .iter()
        .map(String::as_str)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        added,
        [
            "[modes.lean]".to_owned(),
            "base = \"all\"".to_owned(),
            format!("disable = [\"package:{first}\"]"),
        ],
        "the diff is exactly the edit:\n{after}"
    );
    // Comments and formatting kept: the old text is the new text with the table taken out.
    assert!(
        after.starts_with(&before),
        "appended after the old text:\n{after}"
    );
    for comment in [
        "# The tui test project.",
        "   # keep this name",
        "# two local packages",
        "base = \"all\" # everything",
    ] {
        assert!(after.contains(comment), "{comment:?} kept:\n{after}");
    }
    // The saved mode is what `agentpack mode show` reads.
    let shown = project.ok(&["mode", "show", "lean"]);
    assert!(
        shown.contains(&format!("disable  package:{first}")),
        "{shown}"
    );
}

#[test]
fn quitting_with_unsaved_edits_asks_and_writes_nothing() {
    let project = Project::synced();
    let before = project.manifest();
    let exit_file = project.home.project.join("../tui-exit");
    let Some(tmux) = Tmux::start(&project.tui_command(&exit_file)) else {
        return;
    };
    tmux.wait_for("Staged by mode default");
    tmux.keys(&["b"]);
    tmux.wait_for("Mode default · base none");
    tmux.keys(&["q"]);
    tmux.wait_for("Quit without saving your edits? y/n");
    tmux.keys(&["n"]);
    tmux.keys(&["Escape"]);
    tmux.wait_for("Quit without saving your edits? y/n");
    tmux.keys(&["y"]);
    assert_eq!(wait_exit(&exit_file, &tmux), 0);
    assert_eq!(project.manifest(), before);
}

#[test]
fn refuses_without_a_terminal_and_writes_nothing() {
    let project = Project::synced();
    let before = project.manifest();
    let output = project.run(&["mode", "tui"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs an interactive terminal"), "{stderr}");
    assert!(
        stderr.contains("agentpack mode list|show|create|base|enable|disable|delete"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    assert_eq!(project.manifest(), before);
}
