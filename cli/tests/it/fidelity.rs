//! Staged packages work like a native install (issue 13): executable files stay executable,
//! plugin-root references resolve to the package's own staged copy, collisions keep both files.
//!
//! The real `agentpack` binary against a fake GitHub on 127.0.0.1 and path packages; where the real
//! clients can say whether what is staged works, they are asked (`AGENTPACK_TEST_AGENTS_BIN`, see
//! `conformance.rs`): Claude Code's print-mode init stream, with `ANTHROPIC_BASE_URL` at a closed
//! port on 127.0.0.1 and a dummy key, reports every `SessionStart` hook's outcome before any model
//! request, and no request leaves the machine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use agentpack_test_support::{
    agentpack_bin, agents_bin, claude_init_stream, run_pinned, writable_layer, write,
    write_executable, FakeGitHub, IsolatedHome, Run,
};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use agentpack_lockfile::lock::Lockfile;
use serde_json::Value;

struct World {
    home: IsolatedHome,
    github: FakeGitHub,
}

impl World {
    fn new() -> Self {
        Self {
            home: IsolatedHome::new(),
            github: FakeGitHub::start(),
        }
    }

    /// Runs `agentpack args` against the fake GitHub, asserting success; returns stdout and stderr.
    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let output = self
            .home
            .command(&agentpack_bin(), Some(&self.github))
            .args(args)
            .output()
            .unwrap();
        Run::new(args, output).assert_ok().text()
    }

    fn staged(&self) -> PathBuf {
        self.home.staging_root.join("modes/default")
    }

    /// A directory beside the project, for path packages.
    fn sibling(&self, name: &str) -> PathBuf {
        self.home.project.parent().unwrap().join(name)
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o111
        != 0
}

/// The `(cache_key, content_hash)` of `module` in the project's lock.
fn locked(world: &World, module: &str) -> (String, String) {
    let lock = Lockfile::load(&world.home.project.join("pack.lock")).unwrap();
    let package = lock
        .packages
        .iter()
        .find(|p| p.module.as_str() == module)
        .unwrap_or_else(|| panic!("{module} not in the lock"));
    (
        package.cache_key.as_str().to_owned(),
        package.content_hash.as_ref().unwrap().to_string(),
    )
}

/// The `sha256-tree-v1` digest of `dir` copied with every regular file 0644 (the docs' rule).
fn hash_as_plain_files(dir: &Path) -> String {
    let copy = tempfile::tempdir().unwrap();
    for entry in walkdir(dir) {
        let relative = entry.strip_prefix(dir).unwrap();
        let to = copy.path().join(relative);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    agentpack_store::hash_tree(copy.path()).unwrap().to_string()
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// The `SessionStart` hook outcomes of an init stream: `(stdout, exit code)`.
fn session_start_outcomes(events: &[Value]) -> Vec<(String, i64)> {
    events
        .iter()
        .filter(|e| e["subtype"] == "hook_response" && e["hook_event"] == "SessionStart")
        .map(|e| {
            (
                e["stdout"].as_str().unwrap_or_default().to_owned(),
                e["exit_code"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

const RUN_HOOK: &str = "#!/bin/sh\necho \"hooked-session-start $1\"\n";

/// A GitHub plugin whose `SessionStart` hook runs an executable script from its own root, and a
/// skill with an executable helper; and a path package with an executable hook script.
fn hooked_world() -> World {
    let world = World::new();
    hooked_repo(&world, true);
    let tools = world.sibling("tools");
    write(
        &tools.join(".claude-plugin/plugin.json"),
        r#"{"name": "tools", "version": "0.1.0"}"#,
    );
    write(
        &tools.join("hooks/hooks.json"),
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/hooks/start.sh"}]}]}}"#,
    );
    write_executable(
        &tools.join("hooks/start.sh"),
        "#!/bin/sh\necho tools-start\n",
    );
    world.ok(&["init", "--name", "fidelity"]);
    world.ok(&["add", "acme/hooked", "--no-sync"]);
    world.ok(&["add", tools.to_str().unwrap(), "--no-sync"]);
    world.ok(&["sync"]);
    world
}

/// `acme/hooked` at its first commit, its scripts mode 755 when `executable`.
fn hooked_repo(world: &World, executable: bool) {
    let repo = world.github.repo("acme", "hooked");
    repo.write(
        ".claude-plugin/plugin.json",
        r#"{"name": "hooked", "version": "1.0.0"}"#,
    )
    .write(
        "hooks/hooks.json",
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "\"${CLAUDE_PLUGIN_ROOT}/hooks/run-hook.sh\" session-start"}]}]}}"#,
    )
    .write("hooks/run-hook.sh", RUN_HOOK)
    .write(
        "skills/runner/SKILL.md",
        "---\nname: runner\ndescription: Runs its helper.\n---\n\nRun `scripts/x.sh`.\n",
    )
    .write("skills/runner/scripts/x.sh", "#!/bin/sh\necho x\n");
    for script in ["hooks/run-hook.sh", "skills/runner/scripts/x.sh"]
        .into_iter()
        .filter(|_| executable)
    {
        let path = world
            .github
            .repos_root()
            .join("acme/hooked.git")
            .join(script);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    repo.commit("hooked plugin");
}

#[test]
fn executable_files_stay_executable_without_changing_the_content_hash() {
    let world = hooked_world();
    // The identity keeps the docs' rule: the cache entry holds `f` records only, and the same
    // files without execute bits upstream lock to the same content hash.
    let github = locked(&world, "github.com/acme/hooked");
    let plain = World::new();
    hooked_repo(&plain, false);
    plain.ok(&["init", "--name", "plain"]);
    plain.ok(&["add", "acme/hooked", "--no-sync"]);
    assert_eq!(github.1, locked(&plain, "github.com/acme/hooked").1);
    let path_entry = locked(&world, "tools");
    for (cache_key, content_hash) in [&github, &path_entry] {
        let slot = world.home.agentpack_home.join("cache").join(cache_key);
        assert_eq!(*content_hash, hash_as_plain_files(&slot));
        for file in walkdir(&slot) {
            assert!(!is_executable(&file), "{}", file.display());
        }
    }

    // Every staged copy of an executable source file is executable; other files are not.
    let staged = world.staged();
    let prefix = |entry: &(String, String)| format!("plugin-roots/{}", &entry.0[..16]);
    for path in [
        format!("{}/hooks/run-hook.sh", prefix(&github)),
        format!("{}/skills/runner/scripts/x.sh", prefix(&github)),
        format!("{}/hooks/start.sh", prefix(&path_entry)),
        "plugins/agentpack-bundle/skills/runner/scripts/x.sh".to_owned(),
        "codex-home/skills/runner/scripts/x.sh".to_owned(),
        "opencode/skills/runner/scripts/x.sh".to_owned(),
        "cursor/agentpack-bundle/skills/runner/scripts/x.sh".to_owned(),
        "grok/agentpack-bundle/skills/runner/scripts/x.sh".to_owned(),
        "agy/agentpack-bundle/skills/runner/scripts/x.sh".to_owned(),
    ] {
        assert!(
            is_executable(&staged.join(&path)),
            "{path} is not executable"
        );
    }
    assert!(!is_executable(
        &staged.join("plugins/agentpack-bundle/skills/runner/SKILL.md")
    ));
    let run = Command::new(staged.join("plugins/agentpack-bundle/skills/runner/scripts/x.sh"))
        .output()
        .unwrap();
    assert!(run.status.success());
}

#[test]
fn executable_bits_survive_the_git_protocol_fallback() {
    let world = World::new();
    let repo = world.github.repo("acme", "scripted");
    repo.write(
        "skills/s/SKILL.md",
        "---\nname: s\ndescription: S.\n---\n\nBody\n",
    )
    .write("skills/s/run.sh", "#!/bin/sh\necho run\n");
    std::fs::set_permissions(
        world
            .github
            .repos_root()
            .join("acme/scripted.git/skills/s/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.commit("scripted");
    world.github.set_rest_down(Some(503));
    world.ok(&["init", "--name", "git-fallback"]);
    world.ok(&["add", "acme/scripted/skills/s"]);
    let staged = world.staged();
    assert!(is_executable(
        &staged.join("plugins/agentpack-bundle/skills/s/run.sh")
    ));
    assert!(!is_executable(
        &staged.join("plugins/agentpack-bundle/skills/s/SKILL.md")
    ));
}

#[test]
fn claude_code_runs_every_session_start_hook_with_exit_code_zero() {
    let Some(agents) = agents_bin() else { return };
    let world = hooked_world();
    let bundle = world.staged().join("plugins/agentpack-bundle");
    let events = claude_init_stream(&agents, &world.home.home, &world.home.project, &bundle);
    let outcomes = session_start_outcomes(&events);
    assert_eq!(outcomes.len(), 2, "{outcomes:?}\n{events:#?}");
    for (stdout, exit_code) in &outcomes {
        assert_eq!(*exit_code, 0, "{outcomes:?}");
        assert!(!stdout.contains("Permission denied"), "{stdout}");
    }
    let all: String = outcomes.iter().map(|(s, _)| s.as_str()).collect();
    assert!(all.contains("hooked-session-start session-start"), "{all}");
    assert!(all.contains("tools-start"), "{all}");
}

/// Every absolute path in `text` that ends in `suffix`.
fn paths_ending_in(text: &str, suffix: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')'))
        .filter(|word| word.starts_with('/') && word.ends_with(suffix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn plugin_root_references_resolve_to_the_packages_own_staged_copy_for_every_agent() {
    let world = World::new();
    let repo = world.github.repo("acme", "rooted");
    repo.write(
        ".claude-plugin/plugin.json",
        r#"{"name": "rooted", "version": "1.0.0"}"#,
    )
    .write("scripts/x.sh", "#!/bin/sh\necho rooted-x \"$@\"\n")
    .write(
        "skills/use-script/SKILL.md",
        "---\nname: use-script\ndescription: Runs the package's script.\n---\n\nRun `${CLAUDE_PLUGIN_ROOT}/scripts/x.sh --check`.\n",
    )
    .write(
        "commands/go.md",
        "---\ndescription: Go.\n---\n\nRun `${CURSOR_PLUGIN_ROOT}/scripts/x.sh` first.\n",
    )
    .write(
        "agents/helper.md",
        "---\nname: helper\ndescription: Helps.\n---\n\nUse `${PLUGIN_ROOT}/scripts/x.sh`.\n",
    )
    .write(
        "rules/uses-script.md",
        "---\nalwaysApply: true\n---\n\nAlways run `${CLAUDE_PLUGIN_ROOT}/scripts/x.sh`.\n",
    );
    std::fs::set_permissions(
        world
            .github
            .repos_root()
            .join("acme/rooted.git/scripts/x.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    repo.commit("rooted");
    world.ok(&["init", "--name", "rooted"]);
    world.ok(&["add", "acme/rooted"]);
    let staged = world.staged();
    let generation = std::fs::canonicalize(&staged).unwrap();
    let (cache_key, _) = locked(&world, "github.com/acme/rooted");
    let own_copy = generation.join(format!("plugin-roots/{}", &cache_key[..16]));
    let staged_texts = [
        "plugins/agentpack-bundle/skills/use-script/SKILL.md",
        "plugins/agentpack-bundle/commands/go.md",
        "plugins/agentpack-bundle/agents/helper.md",
        "plugins/agentpack-bundle/skills/uses-script/SKILL.md",
        "codex-home/skills/use-script/SKILL.md",
        "codex-home/skills/go/SKILL.md",
        "codex-home/agents/helper.toml",
        "opencode/skills/use-script/SKILL.md",
        "opencode/commands/go.md",
        "opencode/agents/helper.md",
        "cursor/agentpack-bundle/skills/use-script/SKILL.md",
        "cursor/agentpack-bundle/commands/go.md",
        "cursor/agentpack-bundle/rules/uses-script.mdc",
        "grok/agentpack-bundle/skills/use-script/SKILL.md",
        "grok/agentpack-bundle/agents/helper.md",
        "agy/agentpack-bundle/skills/use-script/SKILL.md",
        "agy/agentpack-bundle/rules/uses-script.md",
    ];
    for relative in staged_texts {
        let text = std::fs::read_to_string(staged.join(relative))
            .unwrap_or_else(|e| panic!("{relative}: {e}"));
        assert!(!text.contains("PLUGIN_ROOT}"), "{relative}:\n{text}");
        let named = paths_ending_in(&text, "/scripts/x.sh");
        assert!(!named.is_empty(), "{relative}:\n{text}");
        for path in named {
            assert_eq!(
                Path::new(&path),
                own_copy.join("scripts/x.sh"),
                "{relative}"
            );
        }
    }
    // The path the staged text names runs (Claude's skill and Codex's), from the project directory.
    for relative in [
        "plugins/agentpack-bundle/skills/use-script/SKILL.md",
        "codex-home/skills/use-script/SKILL.md",
    ] {
        let text = std::fs::read_to_string(staged.join(relative)).unwrap();
        let script = &paths_ending_in(&text, "/scripts/x.sh")[0];
        let run = Command::new(script)
            .arg("--check")
            .current_dir(&world.home.project)
            .output()
            .unwrap();
        assert!(run.status.success(), "{relative}: {script}: {run:?}");
        assert_eq!(String::from_utf8_lossy(&run.stdout), "rooted-x --check\n");
    }
}

/// Two path packages with a different `reviewer` agent, an identical `same` command, and a skill
/// `configure` in one and a command `configure` in the other; synced with `--json`.
fn colliding_world() -> (World, Value) {
    let world = World::new();
    for (name, review, configure) in [
        ("alpha", "Check the style.", "skills/configure/SKILL.md"),
        ("beta", "Find the bugs.", "commands/configure.md"),
    ] {
        let dir = world.sibling(name);
        write(
            &dir.join(".claude-plugin/plugin.json"),
            &format!(r#"{{"name": "{name}", "version": "1.0.0"}}"#),
        );
        write(
            &dir.join("agents/reviewer.md"),
            &format!("---\nname: reviewer\ndescription: Reviews ({name}).\n---\n\n{review}\n"),
        );
        write(
            &dir.join("commands/same.md"),
            "---\ndescription: The same in both.\n---\n\nIdentical bytes.\n",
        );
        let body = if configure.starts_with("skills/") {
            "---\nname: configure\ndescription: Configures (skill).\n---\n\nThe skill.\n"
        } else {
            "---\ndescription: Configures (command).\n---\n\nThe command.\n"
        };
        write(&dir.join(configure), body);
    }
    world.ok(&["init", "--name", "collisions"]);
    for name in ["alpha", "beta"] {
        world.ok(&["add", world.sibling(name).to_str().unwrap(), "--no-sync"]);
    }
    let output = world
        .home
        .command(&agentpack_bin(), Some(&world.github))
        .args(["sync", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    (world, report)
}

#[test]
fn collisions_keep_both_and_sync_json_reports_each_one() {
    let (world, report) = colliding_world();
    let collisions = report["collisions"].as_array().unwrap();
    let claude: Vec<&Value> = collisions
        .iter()
        .filter(|c| c["agent"] == "claude")
        .collect();
    assert_eq!(claude.len(), 2, "{report:#}");
    let reviewer = claude
        .iter()
        .find(|c| c["path"] == "agents/reviewer.md")
        .unwrap();
    let loser = reviewer["renamed_from"].as_str().unwrap();
    let loser_name = if loser == "alpha" { "alpha" } else { "beta" };
    assert_eq!(
        reviewer["renamed_to"],
        format!("agents/{loser_name}-reviewer.md"),
        "{report:#}"
    );
    let bundle = world.staged().join("plugins/agentpack-bundle");
    let renamed =
        std::fs::read_to_string(bundle.join(format!("agents/{loser_name}-reviewer.md"))).unwrap();
    assert!(
        renamed.contains(&format!("name: {loser_name}-reviewer")),
        "{renamed}"
    );
    assert!(bundle.join("agents/reviewer.md").is_file());
    assert!(bundle.join("commands/same.md").is_file());
    assert!(!collisions
        .iter()
        .any(|c| c["path"].as_str().unwrap().contains("same")));
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.contains("`reviewer`"))
        .collect();
    assert_eq!(warnings.len(), 1, "{report:#}");
    assert!(warnings[0].contains("alpha") && warnings[0].contains("beta"));
    assert!(
        claude.iter().any(|c| c["clash"] == "invocation"),
        "{report:#}"
    );
}

#[test]
fn codex_and_opencode_load_the_renamed_collision_losers() {
    let Some(agents) = agents_bin() else { return };
    let (world, report) = colliding_world();
    let collisions = report["collisions"].as_array().unwrap();
    let renamed_to = |agent: &str, path: &str| -> String {
        collisions
            .iter()
            .find(|c| c["agent"] == agent && c["path"] == path)
            .unwrap_or_else(|| panic!("no {agent} collision at {path}: {report:#}"))["renamed_to"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let codex_home = world.home.home.join("codex-layer");
    writable_layer(&world.staged().join("codex-home"), &codex_home);
    let out = run_pinned(
        &agents,
        &world.home,
        "codex",
        &["debug", "prompt-input", "hi"],
        &[("CODEX_HOME", &codex_home)],
    );
    let reviewer_skill = renamed_to("codex", "skills/reviewer");
    let configure_skill = renamed_to("codex", "skills/configure");
    for skill in [
        "reviewer",
        reviewer_skill.trim_start_matches("skills/"),
        "configure",
        configure_skill.trim_start_matches("skills/"),
        "same",
    ] {
        assert!(
            out.contains(&format!("- {skill}: ")) && out.contains(&format!("/{skill}/SKILL.md)")),
            "codex does not list {skill}:\n{out}"
        );
    }
    let root = world.home.home.join("opencode-layer");
    writable_layer(&world.staged().join("opencode"), &root);
    let env = [("OPENCODE_CONFIG_DIR", root.as_path())];
    let renamed_agent = renamed_to("opencode", "agents/reviewer.md");
    let renamed_agent = renamed_agent
        .trim_start_matches("agents/")
        .trim_end_matches(".md");
    for agent in ["reviewer", renamed_agent] {
        let out = run_pinned(
            &agents,
            &world.home,
            "opencode",
            &["debug", "agent", agent],
            &env,
        );
        assert!(out.contains(agent), "{out}");
    }
    // Plugins layer by cache_key, which for path packages hashes their (temporary) directory: which
    // of the two keeps `configure` differs from run to run, so the report says which one lost.
    let skills = run_pinned(&agents, &world.home, "opencode", &["debug", "skill"], &env);
    let configure = collisions
        .iter()
        .find(|c| c["agent"] == "opencode" && c["clash"] == "invocation")
        .unwrap_or_else(|| panic!("no opencode invocation clash: {report:#}"));
    let renamed = configure["renamed_to"].as_str().unwrap();
    if let Some(skill) = renamed.strip_prefix("skills/") {
        assert!(
            skills.contains(&format!("\"name\": \"{skill}\"")),
            "{skills}"
        );
    } else {
        assert!(
            skills.contains("\"name\": \"configure\""),
            "the skill keeps its name: {skills}"
        );
        assert!(
            root.join(renamed).is_file(),
            "the renamed command {renamed} is staged for OpenCode"
        );
    }
}

/// Runs `agentpack <args>` with `var` pointing at a stand-in agent that exits 0; returns stderr.
fn launch_standin(world: &World, args: &[&str], var: &str) -> String {
    let standin = world.sibling("standin.sh");
    write_executable(&standin, "#!/bin/sh\nexit 0\n");
    let output = world
        .home
        .command(&agentpack_bin(), Some(&world.github))
        .args(args)
        .env(var, &standin)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "agentpack {args:?}: {stderr}");
    stderr
}

#[test]
fn a_launch_renders_stages_and_reports_only_its_own_agent() {
    let world = World::new();
    let package = world.sibling("mixed");
    write(
        &package.join(".claude-plugin/plugin.json"),
        r#"{"name": "mixed", "version": "1.0.0"}"#,
    );
    // OpenCode leaves out the alias model and says so; Claude Code takes the agent as written.
    write(
        &package.join("agents/planner.md"),
        "---\nname: planner\ndescription: Plans.\nmodel: sonnet\n---\n\nPlan.\n",
    );
    write(
        &package.join("hooks/hooks.json"),
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}}"#,
    );
    world.ok(&["init", "--name", "launch-one"]);
    world.ok(&["add", package.to_str().unwrap(), "--no-sync"]);

    let stderr = launch_standin(&world, &["claude"], "CLAUDE_PATH");
    let generation = std::fs::canonicalize(world.staged()).unwrap();
    assert!(generation
        .join("plugins/agentpack-bundle/agents/planner.md")
        .is_file());
    for other in ["codex-home", "opencode", "cursor", "grok", "agy"] {
        assert!(
            !generation.join(other).exists(),
            "a claude launch staged {other}"
        );
    }
    assert!(
        !stderr.contains("OpenCode") && !stderr.contains("sonnet"),
        "{stderr}"
    );
    assert!(!stderr.contains("hook for"), "{stderr}");

    // A bare sync builds every agent and says what every agent's conversion did.
    let synced = world.ok(&["sync"]);
    assert!(synced.contains("model `sonnet` left out"), "{synced}");
    let all = std::fs::canonicalize(world.staged()).unwrap();
    for tree in ["codex-home", "opencode", "cursor", "grok", "agy", "plugins"] {
        assert!(all.join(tree).is_dir(), "sync did not stage {tree}");
    }
    // A launch after it uses that generation, and reports only its own agent.
    let stderr = launch_standin(&world, &["codex"], "CODEX_PATH");
    assert_eq!(std::fs::canonicalize(world.staged()).unwrap(), all);
    assert!(!stderr.contains("sonnet"), "{stderr}");
}
