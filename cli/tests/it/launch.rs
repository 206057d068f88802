//! The launchers through the real `agentpack` binary: each agent is a stand-in script on PATH that
//! records its arguments, environment and the files it can see, and each test asserts the
//! documented invocation and that nothing under the user's real agent homes changed beyond what the
//! docs allow. The project depends on a local path package, so no network is involved.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{demo_plugin, write, write_executable, FakeGitHub, IsolatedHome};

const STANDIN: &str = r#"#!/bin/sh
out="$STANDIN_RECORD/$(basename "$0").txt"
{
  for a in "$@"; do printf 'arg=%s\n' "$a"; done
  for v in HOME CODEX_HOME OPENCODE_CONFIG_DIR GROK_HOME CURSOR_CONFIG_DIR CURSOR_DATA_DIR CARGO_HOME RUSTUP_HOME DOCKER_CONFIG CLAUDE_CONFIG_DIR; do
    eval "val=\${$v-<unset>}"
    printf 'env:%s=%s\n' "$v" "$val"
  done
  env | grep '^AGENTPACK_MCP_' | sort | sed 's/^/env:/'
  printf 'cwd=%s\n' "$(pwd -P)"
  for d in "$@" "$CODEX_HOME" "$OPENCODE_CONFIG_DIR" "$GROK_HOME" "$CURSOR_CONFIG_DIR"; do
    if [ -n "$d" ] && [ -d "$d" ]; then
      (cd "$d" && find -L . -name '*.md' 2>/dev/null | sort | sed "s|^\.|file:$d|")
    fi
  done
  ls "$AGENTPACK_HOME/cache/store/v1/leases" 2>/dev/null | sed 's/^/lease:/'
} > "$out.tmp"
mv "$out.tmp" "$out"
if [ -n "$STANDIN_WAIT" ]; then
  i=0
  while [ ! -e "$STANDIN_WAIT" ] && [ $i -lt 400 ]; do sleep 0.025; i=$((i+1)); done
fi
exit "${STANDIN_EXIT:-0}"
"#;

struct Launch {
    iso: IsolatedHome,
    bin: PathBuf,
    record: PathBuf,
}

/// What a stand-in saw.
#[derive(Debug)]
struct Seen {
    args: Vec<String>,
    env: BTreeMap<String, String>,
    files: Vec<String>,
    leases: usize,
    cwd: String,
}

fn setup() -> Launch {
    let iso = IsolatedHome::new();
    let root = iso.project.parent().unwrap().to_path_buf();
    let bin = root.join("bin");
    let record = root.join("record");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&record).unwrap();
    for name in ["claude", "cursor-agent", "opencode", "codex", "grok", "agy"] {
        let path = bin.join(name);
        write_executable(&path, STANDIN);
    }
    let pkg = iso.project.join("pkg");
    demo_plugin(
        &pkg,
        "A demo skill staged by agentpack for the launch tests.",
    );
    write(
        &pkg.join("agents/reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code for the launch tests.\n---\nReview the code.\n",
    );
    write(
        &pkg.join("commands/hello.md"),
        "---\ndescription: Say hello\n---\nSay hello.\n",
    );
    write(
        &iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n\"demo\" = { path = \"pkg\" }\n\n[mcp.servers.retrieval]\ncommand = \"uvx\"\nargs = [\"mcp-retrieval\"]\nenv = { API_KEY = \"sk-SENTINEL\" }\n",
    );
    // The user's real agent configuration.
    let home = &iso.home;
    write(
        &home.join(".claude/settings.json"),
        "{\"theme\": \"dark\"}\n",
    );
    write(&home.join(".claude.json"), "{}\n");
    write(&home.join(".codex/config.toml"), "model = \"gpt-5\"\n");
    write(&home.join(".codex/auth.json"), "{}\n");
    write(
        &home.join(".config/opencode/opencode.json"),
        "{\"provider\": {}}\n",
    );
    write(
        &home.join(".cursor/cli-config.json"),
        "{\"editor\": {\"vimMode\": true}}\n",
    );
    write(&home.join(".grok/config.toml"), "model = \"grok-4\"\n");
    write(&home.join(".gemini/settings.json"), "{}\n");
    Launch { iso, bin, record }
}

impl Seen {
    /// Asserts the stand-in could see a file whose path ends with `suffix`.
    #[track_caller]
    fn assert_sees(&self, suffix: &str) {
        assert!(
            self.files.iter().any(|f| f.ends_with(suffix)),
            "no {suffix} among {:?}",
            self.files
        );
    }
}

impl Launch {
    fn run(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut command = self
            .iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .env("PATH", path)
            .env("STANDIN_RECORD", &self.record)
            .args(args);
        for (name, value) in envs {
            command.env(name, value);
        }
        command.output().unwrap()
    }

    fn ok(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let output = self.run(args, envs);
        assert!(
            output.status.success(),
            "agentpack {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn seen(&self, binary: &str) -> Seen {
        let text = std::fs::read_to_string(self.record.join(format!("{binary}.txt"))).unwrap();
        let mut seen = Seen {
            args: Vec::new(),
            env: BTreeMap::new(),
            files: Vec::new(),
            leases: 0,
            cwd: String::new(),
        };
        for line in text.lines() {
            if let Some(arg) = line.strip_prefix("arg=") {
                seen.args.push(arg.to_string());
            } else if let Some(var) = line.strip_prefix("env:") {
                let (name, value) = var.split_once('=').unwrap();
                seen.env.insert(name.to_string(), value.to_string());
            } else if let Some(file) = line.strip_prefix("file:") {
                seen.files.push(file.to_string());
            } else if line.starts_with("lease:") {
                seen.leases += 1;
            } else if let Some(cwd) = line.strip_prefix("cwd=") {
                seen.cwd = cwd.to_string();
            }
        }
        seen
    }

    /// The generation the mode's pointer selects.
    fn generation(&self) -> PathBuf {
        std::fs::canonicalize(self.iso.staging_root.join("modes/default")).unwrap()
    }

    fn project(&self) -> PathBuf {
        std::fs::canonicalize(&self.iso.project).unwrap()
    }

    fn leases_now(&self) -> usize {
        std::fs::read_dir(self.iso.agentpack_home.join("cache/store/v1/leases"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    .count()
            })
            .unwrap_or(0)
    }
}

/// Every path under `root` with its type, mode, and content or link target.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let key = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                out.insert(
                    key,
                    format!("link {}", std::fs::read_link(&path).unwrap().display()),
                );
            } else if meta.is_dir() {
                out.insert(key, format!("dir {mode:o}"));
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(
                    key,
                    format!("file {mode:o} {}", String::from_utf8_lossy(&bytes)),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The paths that differ, ignoring agentpack's own state under the fake HOME (XDG data/cache).
fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| {
            !k.starts_with(".local/")
                && !k.starts_with(".cache/")
                && *k != ".local"
                && *k != ".cache"
        })
        .filter(|k| before.get(*k) != after.get(*k))
        // The one thing the docs let every sync create in a real agent home: Codex's session
        // history, empty (sync_creates_only_the_codex_session_history checks it).
        .filter(|k| {
            let created = !before.contains_key(*k);
            !(created && CODEX_HISTORY.contains(&k.as_str()))
        })
        .cloned()
        .collect()
}

/// What every sync makes sure exists in `~/.codex` (as the snapshot names them).
const CODEX_HISTORY: [&str; 3] = [
    ".codex/archived_sessions",
    ".codex/history.jsonl",
    ".codex/sessions",
];

#[test]
fn sync_creates_only_the_codex_session_history() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    t.ok(&["sync"], &[]);
    let after = snapshot(&t.iso.home);
    let created: Vec<&String> = after
        .keys()
        .filter(|k| {
            !before.contains_key(*k) && !k.starts_with(".local") && !k.starts_with(".cache")
        })
        .collect();
    assert_eq!(created, CODEX_HISTORY.iter().collect::<Vec<_>>());
    assert!(t.iso.home.join(".codex/sessions").is_dir());
    assert_eq!(
        std::fs::read(t.iso.home.join(".codex/history.jsonl")).unwrap(),
        b""
    );
}

#[test]
fn claude_gets_the_plugin_dir_inline_settings_yolo_and_the_trailing_args() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    let output = t.run(
        &["--yolo", "claude", "--model", "opus"],
        &[("STANDIN_EXIT", "3")],
    );
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = t.seen("claude");
    let generation = t.generation();
    let bundle = generation.join("plugins/agentpack-bundle");
    assert_eq!(seen.args[0], "--plugin-dir");
    assert_eq!(seen.args[1], bundle.to_string_lossy());
    assert_eq!(seen.args[2], "--settings");
    let settings: serde_json::Value = serde_json::from_str(&seen.args[3]).unwrap();
    assert_eq!(settings["includeCoAuthoredBy"], false);
    assert_eq!(
        &seen.args[4..],
        ["--dangerously-skip-permissions", "--model", "opus"]
    );
    assert_eq!(seen.env["CLAUDE_CONFIG_DIR"], "<unset>");
    assert_eq!(seen.env["HOME"], t.iso.home.to_string_lossy());
    seen.assert_sees("plugins/agentpack-bundle/skills/demo-skill/SKILL.md");
    assert!(
        seen.env.values().any(|v| v == "sk-SENTINEL"),
        "secret as a variable: {:?}",
        seen.env
    );
    assert_eq!(seen.cwd, t.project().to_string_lossy());
    // A lease was held while the agent ran, and released after.
    assert!(seen.leases >= 1, "{seen:?}");
    assert_eq!(t.leases_now(), 0);
    assert!(changed(&before, &snapshot(&t.iso.home)).is_empty());
}

#[test]
fn arguments_after_a_double_dash_reach_the_agent_unchanged() {
    let t = setup();
    t.ok(&["claude", "--", "--mode", "x", "--yolo"], &[]);
    let seen = t.seen("claude");
    assert!(
        !seen
            .args
            .contains(&"--dangerously-skip-permissions".to_string()),
        "{:?}",
        seen.args
    );
    assert_eq!(&seen.args[seen.args.len() - 3..], ["--mode", "x", "--yolo"]);
}

#[test]
fn cursor_agent_runs_in_a_synthetic_home_with_the_agents_link() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    // CURSOR_AGENT_PATH: a binary that is not on PATH.
    let elsewhere = t.iso.project.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::rename(t.bin.join("cursor-agent"), elsewhere.join("cursor-agent")).unwrap();
    let path = elsewhere.join("cursor-agent");
    t.ok(
        &["--yolo", "agent", "-p", "hello"],
        &[("CURSOR_AGENT_PATH", &path.to_string_lossy())],
    );
    let seen = t.seen("cursor-agent");
    let project = t.project();
    assert_eq!(
        seen.args,
        [
            "--trust",
            "--force",
            "--workspace",
            &*project.to_string_lossy(),
            "-p",
            "hello"
        ]
    );
    let fake_home = PathBuf::from(&seen.env["HOME"]);
    assert_ne!(fake_home, t.iso.home);
    assert_eq!(
        seen.env["CURSOR_CONFIG_DIR"],
        fake_home.join(".cursor").to_string_lossy()
    );
    assert_eq!(
        seen.env["CURSOR_DATA_DIR"],
        t.iso.home.join(".cursor").to_string_lossy()
    );
    assert_eq!(
        seen.env["CARGO_HOME"],
        t.iso.home.join(".cargo").to_string_lossy()
    );
    seen.assert_sees(".cursor/skills/demo-skill/SKILL.md");
    let link = t.iso.project.join(".cursor/agents");
    assert!(std::fs::read_link(&link)
        .unwrap()
        .starts_with(t.generation()));
    assert_eq!(
        changed(&before, &snapshot(&t.iso.home)),
        [".config/Cursor", ".config/cursor"],
        "only the documented profile directories"
    );
    // Another launcher removes the link.
    t.ok(&["claude"], &[]);
    assert!(std::fs::symlink_metadata(&link).is_err());
}

#[test]
fn opencode_gets_a_config_root_and_yolo_permission() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    t.ok(&["--yolo", "opencode", "--model", "anthropic/x"], &[]);
    let seen = t.seen("opencode");
    assert_eq!(seen.args, ["--model", "anthropic/x"]);
    let root = PathBuf::from(&seen.env["OPENCODE_CONFIG_DIR"]);
    assert!(root.starts_with(&t.iso.agentpack_home), "{root:?}");
    seen.assert_sees("skills/demo-skill/SKILL.md");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("opencode.json")).unwrap())
            .unwrap();
    assert_eq!(config["permission"], "allow");
    assert!(
        config["provider"].is_object(),
        "seeded from the user's config"
    );
    assert!(changed(&before, &snapshot(&t.iso.home)).is_empty());
}

#[test]
fn codex_gets_a_home_with_history_links_and_the_yolo_flag() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    t.ok(&["--yolo", "codex", "--model", "gpt-5-codex"], &[]);
    let seen = t.seen("codex");
    assert_eq!(
        seen.args,
        [
            "--dangerously-bypass-approvals-and-sandbox",
            "--model",
            "gpt-5-codex"
        ]
    );
    let home = PathBuf::from(&seen.env["CODEX_HOME"]);
    assert!(home.to_string_lossy().contains("/ap-c/"), "{home:?}");
    seen.assert_sees("skills/demo-skill/SKILL.md");
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(
        config.contains("model = \"gpt-5\"") && config.contains("sk-SENTINEL"),
        "{config}"
    );
    assert!(
        changed(&before, &snapshot(&t.iso.home)).is_empty(),
        "only the session history is created in ~/.codex"
    );
}

#[test]
fn grok_gets_its_home_and_cwd() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    t.ok(&["--yolo", "grok", "-m", "x"], &[]);
    let seen = t.seen("grok");
    let project = t.project();
    assert_eq!(
        seen.args,
        [
            "--always-approve",
            "--cwd",
            &*project.to_string_lossy(),
            "-m",
            "x"
        ]
    );
    let home = PathBuf::from(&seen.env["GROK_HOME"]);
    assert!(
        home.starts_with(t.iso.agentpack_home.join("projects")),
        "{home:?}"
    );
    assert!(home
        .join("plugins/agentpack-bundle/skills/demo-skill/SKILL.md")
        .is_file());
    assert_eq!(changed(&before, &snapshot(&t.iso.home)), [".grok/sessions"]);
}

#[test]
fn agy_gets_add_dir_and_the_workspace_plugin_link() {
    let t = setup();
    let before = snapshot(&t.iso.home);
    t.ok(&["--yolo", "agy"], &[]);
    let seen = t.seen("agy");
    let project = t.project();
    assert_eq!(
        seen.args,
        [
            "--dangerously-skip-permissions",
            "--add-dir",
            &*project.to_string_lossy()
        ]
    );
    let link = t.iso.project.join(".agents/plugins/agentpack-bundle");
    assert!(link.join("plugin.json").is_file());
    assert!(changed(&before, &snapshot(&t.iso.home)).is_empty());
    t.ok(&["codex"], &[]);
    assert!(
        std::fs::symlink_metadata(&link).is_err(),
        "other launchers remove it"
    );
}

#[test]
fn a_missing_agent_is_a_clear_error() {
    let t = setup();
    std::fs::remove_file(t.bin.join("grok")).unwrap();
    let output = t.run(&["grok"], &[("PATH", "/usr/bin:/bin")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Grok is not installed") && stderr.contains("GROK_PATH"),
        "{stderr}"
    );
}

#[test]
fn an_unchanged_project_skips_the_sync() {
    let t = setup();
    t.ok(&["claude"], &[]);
    let record = t.iso.agentpack_home.join("projects");
    let record = std::fs::read_dir(&record)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("launch/default-claude.json");
    let stamp = || std::fs::metadata(&record).unwrap().modified().unwrap();
    let first = stamp();
    std::thread::sleep(std::time::Duration::from_millis(20));
    t.ok(&["claude"], &[]);
    assert_eq!(stamp(), first, "the second launch took the fast path");
    t.ok(&["claude"], &[("AGENTPACK_FULL_VERIFY", "1")]);
    let full = stamp();
    assert_ne!(full, first, "AGENTPACK_FULL_VERIFY=1 syncs");
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(
        &t.iso.project.join(".agents/skills/local/SKILL.md"),
        "---\nname: local\ndescription: x\n---\nx\n",
    );
    t.ok(&["claude"], &[]);
    let overlay = stamp();
    assert_ne!(overlay, full, "a visible change syncs");
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(
        &t.iso.project.join("pkg/skills/demo-skill/SKILL.md"),
        "---\nname: demo-skill\ndescription: Changed.\n---\nChanged.\n",
    );
    t.ok(&["claude"], &[]);
    assert_ne!(stamp(), overlay, "an edit of a path dependency syncs");
    let bundle = t
        .generation()
        .join("plugins/agentpack-bundle/skills/demo-skill/SKILL.md");
    assert!(std::fs::read_to_string(bundle)
        .unwrap()
        .contains("Changed."));
}

#[test]
fn a_running_agent_keeps_its_generation_while_a_sync_and_a_launch_switch_the_pointer() {
    let t = setup();
    let release = t.record.join("release");
    let path = format!(
        "{}:{}",
        t.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut first = t
        .iso
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .env("PATH", &path)
        .env("STANDIN_RECORD", &t.record)
        .env("STANDIN_WAIT", &release)
        .arg("claude")
        .spawn()
        .unwrap();
    let started = t.record.join("claude.txt");
    for _ in 0..400 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let seen = t.seen("claude");
    let old_bundle = PathBuf::from(&seen.args[1]);
    assert_eq!(
        t.leases_now(),
        2,
        "the launcher and the agent hold leases while it runs"
    );
    // A change to ./.agents makes the next launch build and select another generation.
    write(
        &t.iso.project.join(".agents/skills/local/SKILL.md"),
        "---\nname: local\ndescription: A local skill.\n---\nLocal.\n",
    );
    t.ok(&["sync"], &[]);
    let after_sync = t.generation();
    assert_ne!(
        after_sync.join("plugins/agentpack-bundle"),
        old_bundle,
        "a bare sync moved the pointer"
    );
    // And another launch moves it again.
    write(
        &t.iso.project.join(".agents/skills/other/SKILL.md"),
        "---\nname: other\ndescription: Another local skill.\n---\nOther.\n",
    );
    t.ok(&["codex"], &[]);
    assert_ne!(t.generation(), after_sync, "a launch moved the pointer");
    assert_ne!(
        t.generation().join("plugins/agentpack-bundle"),
        old_bundle,
        "the pointer moved"
    );
    // The running agent's generation is untouched and still holds what it was launched with.
    assert!(old_bundle.join("skills/demo-skill/SKILL.md").is_file());
    assert!(!old_bundle.join("skills/local").exists());
    // A GC that keeps no history still keeps what the running agent holds a lease on.
    t.ok(&["gc", "--keep-generations", "0"], &[]);
    assert!(
        old_bundle.join("skills/demo-skill/SKILL.md").is_file(),
        "gc kept the leased generation"
    );
    std::fs::write(&release, "").unwrap();
    assert!(first.wait().unwrap().success());
    assert_eq!(t.leases_now(), 0);
    // Once the agent is gone, nothing roots the old generation: it can be collected.
    t.ok(&["gc", "--keep-generations", "0"], &[]);
    assert!(
        !old_bundle.exists(),
        "the released generation was collected"
    );
    // A launch stages only its own agent (issue 13): the selected generation is Codex's.
    assert!(
        t.generation().join("codex-home").is_dir(),
        "the selected one stays"
    );
}

#[test]
fn secrets_reach_the_agent_when_a_bare_sync_built_the_generation() {
    let t = setup();
    t.ok(&["sync"], &[]);
    t.ok(&["codex"], &[]);
    let seen = t.seen("codex");
    let config =
        std::fs::read_to_string(PathBuf::from(&seen.env["CODEX_HOME"]).join("config.toml"))
            .unwrap();
    assert!(config.contains("sk-SENTINEL"), "{config}");
    t.ok(&["claude"], &[]);
    let seen = t.seen("claude");
    assert!(
        seen.env.values().any(|v| v == "sk-SENTINEL"),
        "{:?}",
        seen.env
    );
}

/// agy's workspace plugin link lives in `./.agents/`, the project overlay; it is agentpack's own,
/// so it changes neither the generation nor the fast path (a reviewer found every agy launch built
/// a new generation).
#[test]
fn the_agy_workspace_link_is_not_project_content() {
    let t = setup();
    t.ok(&["agy"], &[]);
    let first = t.generation();
    let record = t
        .iso
        .agentpack_home
        .join("projects")
        .read_dir()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("launch/default-agy.json");
    let stamp = || std::fs::metadata(&record).unwrap().modified().unwrap();
    let recorded = stamp();
    std::thread::sleep(std::time::Duration::from_millis(20));
    t.ok(&["agy"], &[]);
    assert_eq!(
        stamp(),
        recorded,
        "the second agy launch took the fast path"
    );
    // A launch stages only its own agent (issue 13); after a bare sync every launch uses its
    // generation, which the link does not change either.
    assert!(first.join("agy/agentpack-bundle").is_dir());
    t.ok(&["sync"], &[]);
    let all = t.generation();
    t.ok(&["agy"], &[]);
    assert_eq!(t.generation(), all, "agy uses the bare sync's generation");
    t.ok(&["claude"], &[]);
    assert_eq!(t.generation(), all, "so does claude");
    t.ok(&["sync"], &[]);
    assert_eq!(t.generation(), all, "and a bare sync again");
}

/// `--workspace` is a global flag: before or after the launcher, it names the agent's workspace.
#[test]
fn workspace_is_a_global_flag() {
    let t = setup();
    let elsewhere = t.iso.project.join("sub");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let elsewhere = std::fs::canonicalize(&elsewhere).unwrap();
    for args in [
        &["--workspace", "sub", "grok"][..],
        &["grok", "--workspace", "sub", "--", "-m", "x"][..],
    ] {
        t.ok(args, &[]);
        let seen = t.seen("grok");
        assert_eq!(
            seen.args[..2],
            ["--cwd", &*elsewhere.to_string_lossy()],
            "{args:?}"
        );
    }
}

/// Each launcher's binary override (`<AGENT>_PATH`) names the executable, off `PATH` too; one that
/// is not an executable file is a clear error.
#[test]
fn every_binary_override_is_honoured() {
    let t = setup();
    let elsewhere = t.iso.home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for (command, binary, var) in [
        ("claude", "claude", "CLAUDE_PATH"),
        ("agent", "cursor-agent", "CURSOR_AGENT_PATH"),
        ("opencode", "opencode", "OPENCODE_PATH"),
        ("codex", "codex", "CODEX_PATH"),
        ("grok", "grok", "GROK_PATH"),
        ("agy", "agy", "AGY_PATH"),
    ] {
        let moved = elsewhere.join(format!("my-{binary}"));
        std::fs::rename(t.bin.join(binary), &moved).unwrap();
        t.ok(&[command], &[(var, &moved.to_string_lossy())]);
        assert!(t.record.join(format!("my-{binary}.txt")).is_file(), "{var}");
        let output = t.run(&[command], &[(var, "/nonexistent/agent")]);
        assert!(!output.status.success(), "{var}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(var) && stderr.contains("/nonexistent/agent"),
            "{var}: {stderr}"
        );
        std::fs::rename(&moved, t.bin.join(binary)).unwrap();
    }
}

/// The sync inside `add` tidies like a bare `sync`: the workspace link a launcher placed goes.
#[test]
fn the_sync_inside_add_removes_launcher_links_like_a_bare_sync() {
    let t = setup();
    t.ok(&["agy"], &[]);
    let link = t.iso.project.join(".agents/plugins/agentpack-bundle");
    assert!(std::fs::symlink_metadata(&link).is_ok());
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hello-skill");
    t.ok(&["add", example.to_str().unwrap()], &[]);
    assert!(
        std::fs::symlink_metadata(&link).is_err(),
        "the link to the old generation is gone"
    );
}

/// With separate roots (`--definition-root` and `--workspace`) the fast path is that pair's, as
/// the rest of the project state is: a second launch takes it, and a change in the workspace's
/// `.agents/` ends it (the overlay staged is the workspace's, not the definition's).
#[test]
fn separate_roots_take_the_fast_path_of_their_pair() {
    let t = setup();
    let checkout = t.iso.project.parent().unwrap().join("checkout");
    std::fs::create_dir_all(&checkout).unwrap();
    let definition = t.project();
    let checkout = std::fs::canonicalize(&checkout).unwrap();
    let args = [
        "-v",
        "--definition-root",
        definition.to_str().unwrap(),
        "--workspace",
        checkout.to_str().unwrap(),
        "claude",
    ];
    const FAST: &str = "launch fast path: inputs unchanged";
    let launch = || String::from_utf8_lossy(&t.ok(&args, &[]).stderr).into_owned();
    let first = launch();
    assert!(!first.contains(FAST), "the first launch syncs: {first}");
    let second = launch();
    assert!(second.contains(FAST), "the second launch is fast: {second}");
    t.seen("claude")
        .assert_sees("plugins/agentpack-bundle/skills/demo-skill/SKILL.md");

    write(
        &checkout.join(".agents/skills/local/SKILL.md"),
        "---\nname: local\ndescription: The workspace's own skill.\n---\nx\n",
    );
    let changed = launch();
    assert!(
        changed.contains("launch fast path declined: inputs changed"),
        "the workspace's overlay changed: {changed}"
    );
    t.seen("claude")
        .assert_sees("plugins/agentpack-bundle/skills/local/SKILL.md");
    let again = launch();
    assert!(again.contains(FAST), "fast again after the sync: {again}");

    // The definition alone (one root) is another pair, with its own record.
    let single = String::from_utf8_lossy(&t.ok(&["-v", "claude"], &[]).stderr).into_owned();
    assert!(!single.contains(FAST), "one root is not the pair: {single}");
}

/// The fast path says what a full sync would about a lock without content hashes (it keeps the
/// count in its record rather than parse the lock again), and `AGENTPACK_REQUIRE_VERIFIED=1` sends
/// such a launch through the full sync, which refuses it. A GitHub package: a sync keeps a version
/// 2 lock of one as it is (a path package is hashed again by every sync).
#[test]
fn the_fast_path_says_the_lock_is_unverified_and_require_verified_refuses() {
    let github = FakeGitHub::start();
    let repo = github.repo("acme", "skills");
    repo.write(
        "SKILL.md",
        "---\nname: demo\ndescription: the demo skill\n---\n\nDo demo things.\n",
    );
    repo.commit("one");
    let project = agentpack_test_support::Project::with_github(github);
    project.ok(&["init", "--name", "demo"]);
    project.ok(&["add", "acme/skills"]);
    let text = project.read("pack.lock");
    let stripped: String = text
        .lines()
        .filter(|line| !line.starts_with("content_hash"))
        .map(|line| {
            if line.starts_with("lockfile_version") {
                "lockfile_version = 2"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    assert_ne!(stripped, text, "the lock had content hashes");
    project.write("pack.lock", &stripped);
    let standin = project.home.home.join("bin/claude");
    write_executable(&standin, "#!/bin/sh\nexit 0\n");
    const UNVERIFIED: &str = "1 package(s) in pack.lock have no content hash";
    const FAST: &str = "launch fast path: inputs unchanged";
    let launch = |envs: &[(&str, &str)]| {
        let mut command = project.command(&["-v", "claude"]);
        command.env("CLAUDE_PATH", &standin);
        for (name, value) in envs {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), stderr)
    };
    let (ok, full) = launch(&[]);
    assert!(
        ok && !full.contains(FAST) && full.contains(UNVERIFIED),
        "{full}"
    );
    let (ok, fast) = launch(&[]);
    assert!(
        ok && fast.contains(FAST) && fast.contains(UNVERIFIED),
        "{fast}"
    );
    let (ok, refused) = launch(&[("AGENTPACK_REQUIRE_VERIFIED", "1")]);
    assert!(!ok, "{refused}");
    assert!(refused.contains("AGENTPACK_REQUIRE_VERIFIED"), "{refused}");
    assert_eq!(project.read("pack.lock"), stripped, "the lock is as it was");
}
