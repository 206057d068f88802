//! The partial rows of issue 20: behaviours the docs promise for locks, path packages, modes,
//! launches, rollback and eject, each checked through the real `agentpack` binary against the fake
//! GitHub (and a local npm registry where npm matters). One test per item, named after it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{
    agentpack_bin, make_writable, write_executable, Endpoint, FakeGitHub, IsolatedHome, TestRepo,
};

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

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = self.home.command(&agentpack_bin(), Some(&self.github));
        command.args(args);
        command
    }

    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = self.command(args);
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    }

    /// Runs and asserts success; returns (stdout, stderr).
    fn ok_with(&self, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
        let output = self.run_with(args, env);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "agentpack {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        (stdout, stderr)
    }

    fn ok(&self, args: &[&str]) -> (String, String) {
        self.ok_with(args, &[])
    }

    /// Runs and asserts failure; returns stderr.
    fn fails_with(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let output = self.run_with(args, env);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            !output.status.success(),
            "agentpack {args:?} should fail\nstdout:\n{}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        );
        stderr
    }

    fn path(&self, name: &str) -> PathBuf {
        self.home.project.join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    fn write(&self, name: &str, text: &str) {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    fn lock(&self) -> String {
        self.read("pack.lock")
    }

    fn manifest(&self) -> String {
        self.read("agentpack.toml")
    }

    /// `<staging-root>/modes/default`.
    fn staged(&self) -> PathBuf {
        self.home.staging_root.join("modes/default")
    }

    fn init(&self) {
        self.ok(&["init", "--name", "demo"]);
    }
}

impl World {
    /// `acme/<repo>` on the fake GitHub with one commit: the skill `skill` at its root.
    fn skill_repo(&self, repo: &str, skill_name: &str) -> TestRepo {
        let repo = self.github.repo("acme", repo);
        skill(&repo, "", skill_name);
        repo.commit("one");
        repo
    }
}

fn skill(repo: &TestRepo, dir: &str, name: &str) {
    let file = if dir.is_empty() {
        "SKILL.md".to_owned()
    } else {
        format!("{dir}/SKILL.md")
    };
    repo.write(
        &file,
        format!("---\nname: {name}\ndescription: the {name} skill\n---\n\nDo {name} things.\n"),
    );
}

fn write_dir_skill(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: the {name} skill\n---\n\nDo {name} things.\n"),
    )
    .unwrap();
}

/// The lock without its content hashes, as a version 2 lock (written before hashes existed).
fn as_version_2(lock: &str) -> String {
    lock.lines()
        .filter(|line| !line.starts_with("content_hash = "))
        .map(|line| {
            if line.starts_with("lockfile_version = ") {
                "lockfile_version = 2"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn v2_locks_are_kept_and_an_unchanged_lock_is_not_rewritten() {
    let world = World::new();
    world.skill_repo("skills", "demo");
    world.init();
    world.ok(&["add", "acme/skills"]);
    let v3 = world.lock();
    assert!(v3.contains("content_hash = "), "{v3}");

    // A version 2 lock with a warm cache: sync stages from the cache, says the package is not
    // verified, and neither downloads nor rewrites the lock.
    let v2 = as_version_2(&v3);
    world.write("pack.lock", &v2);
    world.github.reset_counters();
    let (_, said) = world.ok(&["sync"]);
    assert!(
        said.contains(
            "1 package(s) in pack.lock have no content hash and are not verified; run `agentpack lock` to record them"
        ),
        "{said}"
    );
    assert_eq!(world.lock(), v2, "sync keeps the version 2 lock as it is");
    assert_eq!(
        world.github.total(Endpoint::Tarball),
        0,
        "nothing downloaded"
    );
    assert!(world
        .staged()
        .join("plugins/agentpack-bundle/skills/demo/SKILL.md")
        .is_file());

    // AGENTPACK_REQUIRE_VERIFIED now takes effect with a non-empty [dependencies].
    let err = world.fails_with(&["sync"], &[("AGENTPACK_REQUIRE_VERIFIED", "1")]);
    assert!(err.contains("AGENTPACK_REQUIRE_VERIFIED"), "{err}");
    assert_eq!(world.lock(), v2);

    // `lock` records the hashes on purpose.
    world.ok(&["lock"]);
    assert!(
        world.lock().starts_with("lockfile_version = 3\n"),
        "{}",
        world.lock()
    );

    // A lock that differs only in spacing, or spells the version key the old way, is not rewritten.
    let respaced = world
        .lock()
        .replace("lockfile_version = 3", "lockfile-version = 3")
        .replace(" = ", "   =   ")
        + "\n\n";
    world.write("pack.lock", &respaced);
    let (_, said) = world.ok(&["sync"]);
    assert_eq!(
        world.lock(),
        respaced,
        "nothing the lock records changed\n{said}"
    );
    assert!(!said.contains("Updated"), "{said}");
}

#[test]
fn path_packages_with_a_missing_directory_stage_from_a_warm_slot() {
    let world = World::new();
    world.skill_repo("skills", "remote");
    let local = world.home.project.parent().unwrap().join("local-rules");
    write_dir_skill(&local, "local-rules");
    world.init();
    world.ok(&["add", "acme/skills"]);
    world.ok(&["add", "../local-rules"]);
    let lock = world.lock();
    let staged_skill = world
        .staged()
        .join("plugins/agentpack-bundle/skills/local-rules/SKILL.md");
    assert!(staged_skill.is_file());

    // The directory is gone on this machine, the slot is still filled: sync stages from it and
    // says so, and the lock is not touched.
    std::fs::remove_dir_all(&local).unwrap();
    let (_, said) = world.ok(&["sync"]);
    assert!(
        said.contains("local-rules") && said.contains("does not exist"),
        "{said}"
    );
    assert_eq!(world.lock(), lock);
    assert!(staged_skill.is_file(), "staged from the locked copy");

    // With the slot empty too, sync fails and names the directory.
    let cache = world.home.agentpack_home.join("cache");
    let key = lock
        .split("[[packages]]")
        .find(|entry| entry.contains("module = \"local-rules\""))
        .and_then(|entry| {
            entry
                .lines()
                .find_map(|line| line.strip_prefix("cache_key = \""))
                .map(|rest| rest.trim_end_matches('"').to_owned())
        })
        .unwrap();
    remove_slot(&cache.join(&key));
    let err = world.fails_with(&["sync"], &[]);
    assert!(err.contains("local-rules"), "{err}");
}

/// Removes a cache slot (a link into the store, or a read-only directory).
fn remove_slot(slot: &Path) {
    let meta = std::fs::symlink_metadata(slot).unwrap();
    if meta.file_type().is_symlink() {
        std::fs::remove_file(slot).unwrap();
        return;
    }
    make_writable(slot);
    std::fs::remove_dir_all(slot).unwrap();
}

/// A stand-in agent that records its arguments (one a line) and its environment.
const STANDIN: &str =
    "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$STANDIN_RECORD.args\"\nenv > \"$STANDIN_RECORD.env\"\n";

/// An installed stand-in agent: where it records, and the variables that make agentpack launch it.
struct Standin {
    record: PathBuf,
    path_variable: &'static str,
    path: String,
    record_text: String,
}

impl Standin {
    /// `<path_variable>=<the stand-in>` and `STANDIN_RECORD=<the record>`.
    fn env(&self) -> [(&str, &str); 2] {
        [
            (self.path_variable, self.path.as_str()),
            ("STANDIN_RECORD", self.record_text.as_str()),
        ]
    }
}

impl World {
    /// Installs a stand-in for `binary`, launched through `path_variable` (`CLAUDE_PATH`...).
    fn standin(&self, binary: &str, path_variable: &'static str) -> Standin {
        let root = self.home.project.parent().unwrap();
        let path = root.join("bin").join(binary);
        write_executable(&path, STANDIN);
        let record = root.join(format!("record-{binary}"));
        Standin {
            path: path.to_string_lossy().into_owned(),
            record_text: record.to_string_lossy().into_owned(),
            record,
            path_variable,
        }
    }
}

fn recorded(record: &Path, suffix: &str) -> String {
    std::fs::read_to_string(record.with_extension(suffix)).unwrap_or_default()
}

#[test]
fn short_commits_are_saved_as_full_commit_pins() {
    let world = World::new();
    let repo = world.github.repo("acme", "skills");
    skill(&repo, "", "demo");
    let first = repo.commit("one");
    skill(&repo, "", "demo-2");
    repo.commit("two");
    // A branch whose name is hex but not a prefix of its commit stays a name.
    repo.branch("beef");
    world.init();

    world.ok(&["add", &format!("acme/skills@{}", &first[..7])]);
    let manifest = world.manifest();
    assert!(
        manifest.contains(&format!(
            "\"github.com/acme/skills\" = {{ commit = \"{first}\" }}"
        )),
        "{manifest}"
    );
    assert!(
        world.lock().contains(&format!("commit = \"{first}\"")),
        "{}",
        world.lock()
    );

    world.ok(&["add", "acme/skills@beef"]);
    let manifest = world.manifest();
    assert!(
        manifest.contains("\"github.com/acme/skills\" = \"beef\""),
        "{manifest}"
    );
}

#[test]
fn opencode_gets_the_lsp_tool_variable_unless_already_set() {
    let world = World::new();
    let plugin = world.path("lsp-plugin");
    world.write(
        "lsp-plugin/.claude-plugin/plugin.json",
        r#"{"name": "go-tools", "version": "1.0.0"}"#,
    );
    world.write(
        "lsp-plugin/.lsp.json",
        r#"{"gopls": {"command": "gopls", "args": ["serve"], "extensionToLanguage": {".go": "go"}}}"#,
    );
    assert!(plugin.is_dir());
    world.init();
    world.ok(&["add", "./lsp-plugin"]);
    let staged = std::fs::read_to_string(world.staged().join("opencode/opencode.json")).unwrap();
    assert!(staged.contains("gopls"), "{staged}");

    let opencode = world.standin("opencode", "OPENCODE_PATH");
    let record = &opencode.record;
    let env = opencode.env();
    world.ok_with(&["opencode"], &env);
    let seen = recorded(record, "env");
    assert!(
        seen.lines()
            .any(|line| line == "OPENCODE_EXPERIMENTAL_LSP_TOOL=true"),
        "{seen}"
    );

    let mut own = env.to_vec();
    own.push(("OPENCODE_EXPERIMENTAL_LSP_TOOL", "false"));
    world.ok_with(&["opencode"], &own);
    let seen = recorded(record, "env");
    assert!(
        seen.lines()
            .any(|line| line == "OPENCODE_EXPERIMENTAL_LSP_TOOL=false"),
        "the user's value is kept: {seen}"
    );
}

#[test]
fn rollback_stays_selected_and_a_launch_uses_it() {
    let world = World::new();
    world.skill_repo("one", "one");
    world.skill_repo("two", "two");
    world.init();
    world.ok(&["add", "acme/one"]);
    let first = std::fs::read_link(world.staged()).unwrap();
    world.ok(&["add", "acme/two"]);
    let second = std::fs::read_link(world.staged()).unwrap();
    assert_ne!(first, second);

    world.ok(&["rollback"]);
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), first);

    let claude = world.standin("claude", "CLAUDE_PATH");
    let record = &claude.record;
    let env = claude.env();
    // The launch uses the rolled-back generation, and says so.
    let (_, said) = world.ok_with(&["claude"], &env);
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), first, "{said}");
    assert!(
        recorded(record, "args").contains(&first.to_string_lossy().into_owned()),
        "{}",
        recorded(record, "args")
    );
    assert_eq!(said.matches("rolled back").count(), 1, "{said}");
    // Once: the next launches use it without saying so again.
    let (_, said) = world.ok_with(&["claude"], &env);
    assert!(!said.contains("rolled back"), "{said}");
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), first);
    let codex = world.standin("codex", "CODEX_PATH");
    let (_, said) = world.ok_with(&["codex"], &codex.env());
    assert!(!said.contains("rolled back"), "{said}");
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), first);

    // A sync the user runs builds from the lock again.
    world.ok(&["sync"]);
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), second);

    // A change of the inputs ends a rollback too.
    world.ok(&["rollback"]);
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), first);
    world.write(
        ".agents/skills/mine/SKILL.md",
        "---\nname: mine\ndescription: mine\n---\nMine.\n",
    );
    let (_, said) = world.ok_with(&["claude"], &env);
    assert!(!said.contains("rolled back"), "{said}");
    let now = std::fs::read_link(world.staged()).unwrap();
    assert_ne!(now, first);
    assert!(now
        .join("plugins/agentpack-bundle/skills/mine/SKILL.md")
        .is_file());
}

/// With separate roots, the rollback's inputs are the definition's manifest and lock and the
/// workspace's `./.agents/`: a change of the workspace's overlay ends it, as it does with one root.
#[test]
fn a_rollback_with_separate_roots_ends_when_the_workspaces_overlay_changes() {
    let world = World::new();
    world.skill_repo("one", "one");
    world.skill_repo("two", "two");
    world.init();
    let checkout = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(checkout.path()).unwrap();
    let definition = world.home.project.to_str().unwrap().to_owned();
    let roots = |args: &[&str]| -> Vec<String> {
        [
            "--definition-root",
            &definition,
            "--workspace",
            workspace.to_str().unwrap(),
        ]
        .iter()
        .chain(args)
        .map(|arg| arg.to_string())
        .collect()
    };
    let run = |args: &[&str], env: &[(&str, &str)]| -> String {
        let args = roots(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        world.ok_with(&args, env).1
    };
    run(&["add", "acme/one"], &[]);
    let status: serde_json::Value = {
        let args = roots(&["env", "status", "--json"]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        serde_json::from_str(&world.ok(&args).0).unwrap()
    };
    let pointer = PathBuf::from(status["staging_root"].as_str().unwrap()).join("modes/default");
    let first = std::fs::read_link(&pointer).unwrap();
    run(&["add", "acme/two"], &[]);
    assert_ne!(std::fs::read_link(&pointer).unwrap(), first);
    run(&["rollback"], &[]);
    assert_eq!(std::fs::read_link(&pointer).unwrap(), first);

    let claude = world.standin("claude", "CLAUDE_PATH");
    let env = claude.env();
    let said = run(&["claude"], &env);
    assert!(said.contains("rolled back"), "{said}");
    assert_eq!(std::fs::read_link(&pointer).unwrap(), first);

    std::fs::create_dir_all(workspace.join(".agents/skills/mine")).unwrap();
    std::fs::write(
        workspace.join(".agents/skills/mine/SKILL.md"),
        "---\nname: mine\ndescription: mine\n---\nMine.\n",
    )
    .unwrap();
    let said = run(&["claude"], &env);
    assert!(!said.contains("rolled back"), "{said}");
    let now = std::fs::read_link(&pointer).unwrap();
    assert_ne!(now, first, "the rollback ended with the workspace's change");
    assert!(now
        .join("plugins/agentpack-bundle/skills/mine/SKILL.md")
        .is_file());
}

#[test]
fn eject_output_never_becomes_an_input() {
    let world = World::new();
    world.skill_repo("skills", "demo");
    world.init();
    world.ok(&["add", "acme/skills"]);
    let before = std::fs::read_link(world.staged()).unwrap();

    world.ok(&["eject", "codex", "agy"]);
    assert!(world.path(".agents/skills/demo/SKILL.md").is_file());
    let manifest = world.read(".agentpack/eject/manifest.json");
    assert!(
        manifest.contains(".agents/skills/demo/SKILL.md"),
        "{manifest}"
    );

    // The next sync stages what the lock says, not eject's copies again: the same generation.
    world.ok(&["sync"]);
    assert_eq!(std::fs::read_link(world.staged()).unwrap(), before);

    // The user's own overlay files are still staged next to eject's, which stay out.
    world.write(
        ".agents/skills/mine/SKILL.md",
        "---\nname: mine\ndescription: mine\n---\nMine.\n",
    );
    world.ok(&["sync"]);
    let now = std::fs::read_link(world.staged()).unwrap();
    assert_ne!(now, before);
    let skills: Vec<String> = std::fs::read_dir(now.join("plugins/agentpack-bundle/skills"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut skills = skills;
    skills.sort();
    assert_eq!(skills, ["demo", "mine"]);
    let staged = now.join("plugins/agentpack-bundle/skills/demo/SKILL.md");
    assert!(
        std::fs::read_to_string(&staged)
            .unwrap()
            .contains("Do demo things."),
        "the package's skill, not eject's copy"
    );
}

#[test]
fn reads_print_what_they_wrote_and_lock_needs_nothing_it_has() {
    use agentpack_test_support::{NpmPackage, NpmRegistry};
    let world = World::new();

    // `init` prints its human output on stdout.
    let (stdout, stderr) = world.ok(&["init", "--name", "demo"]);
    assert!(
        stdout.contains("Created agentpack.toml and pack.lock"),
        "{stdout}"
    );
    assert!(stderr.is_empty(), "{stderr}");

    // A plain `lock` with every MCP server pinned asks the registry nothing.
    let registry = NpmRegistry::start();
    registry.publish(
        NpmPackage::new("@demo/mcp", "1.1.0").bin_script("demo-mcp", "#!/usr/bin/env node\n"),
    );
    world.skill_repo("skills", "demo");
    world.write(
        "agentpack.toml",
        "name = \"demo\"\nversion = \"0.0.1\"\n\n[dependencies]\n\"github.com/acme/skills\" = \"main\"\n\n[mcp.servers.demo]\ncommand = \"npx\"\nargs = [\"-y\", \"@demo/mcp@1.1.0\"]\n\n[mcp.servers.other]\ncommand = \"npx\"\nargs = [\"-y\", \"@demo/mcp\"]\n",
    );
    // Pinned against the registry this shell names...
    world.ok_with(&["lock"], &[("npm_config_registry", &registry.url())]);
    let lock = world.lock();
    assert_eq!(lock.matches("status = \"pinned\"").count(), 2, "{lock}");
    let asked = registry.requests().len();
    assert!(asked > 0);
    // ... a plain lock from a shell whose registry is unreachable needs none.
    let (_, said) = world.ok(&["lock"]);
    assert_eq!(
        registry.requests()[asked..],
        [] as [String; 0],
        "a pinned server needs no registry\n{said}"
    );
    assert!(
        !said.contains("registry"),
        "nothing to say about a registry: {said}"
    );
    assert_eq!(world.lock(), lock);
    // `lock --update` does ask, and says the registry cannot be reached.
    let err = world.fails_with(&["lock", "--update"], &[]);
    assert!(err.contains("demo") || err.contains("other"), "{err}");
    assert_eq!(world.lock(), lock);

    // `update` syncs and says where it staged.
    let (_, said) = world.ok_with(&["update"], &[("npm_config_registry", &registry.url())]);
    assert!(said.contains("Staged mode `default` at "), "{said}");

    // `extra sync-claude` prints its human output on stdout.
    world.write(
        ".agents/skills/s/SKILL.md",
        "---\nname: s\ndescription: s\n---\nS.\n",
    );
    let (stdout, _) = world.ok(&["extra", "sync-claude", "--dry-run"]);
    assert!(stdout.contains("would "), "{stdout}");
    let (stdout, _) = world.ok(&["extra", "sync-claude"]);
    assert!(
        stdout.contains(".agents/skills/s -> .claude/skills/s"),
        "{stdout}"
    );
    let (stdout, _) = world.ok(&["extra", "sync-claude"]);
    assert!(stdout.contains("are in sync"), "{stdout}");
}

#[test]
fn completion_hides_internal_commands_and_offers_the_cursor_agent_alias() {
    let world = World::new();
    for shell in ["bash", "zsh", "fish"] {
        let (script, _) = world.ok(&["completion", shell]);
        assert!(script.contains("cursor-agent"), "{shell}: no cursor-agent");
        assert!(script.contains("opencode"), "{shell}: no opencode");
        for hidden in ["hook-exec", "hook__exec", "mcp-exec", "mcp__exec"] {
            assert!(!script.contains(hidden), "{shell} offers {hidden}");
        }
    }
    // `--help` names the alias, as the completion offers it.
    let (help, _) = world.ok(&["--help"]);
    assert!(help.contains("cursor-agent"), "{help}");
    assert!(!help.contains("hook-exec"), "{help}");
}

#[test]
fn conflict_hint_offers_a_pin_only_when_not_already_pinned() {
    let world = World::new();
    let mono = world.github.repo("acme", "mono");
    skill(&mono, "skills/beta", "beta");
    mono.commit("v1");
    mono.tag("v1.0.0");
    skill(&mono, "skills/beta", "beta-2");
    mono.commit("v2");
    mono.tag("v2.0.0");
    for (name, wants) in [("one", "^1.0"), ("two", "^2.0")] {
        let repo = world.github.repo("acme", name);
        skill(&repo, "", name);
        repo.write(
            "agentpack.toml",
            format!("name = \"{name}\"\nversion = \"1.0.0\"\n\n[dependencies]\n\"github.com/acme/mono/skills/beta\" = \"{wants}\"\n"),
        );
        repo.commit(name);
    }
    world.init();
    world.ok(&["add", "acme/one"]);

    // Two packages disagree and agentpack.toml says nothing: pinning there is the way out.
    let err = world.fails_with(&["add", "acme/two"], &[]);
    assert!(
        err.contains("or pin github.com/acme/mono/skills/beta in agentpack.toml"),
        "{err}"
    );

    // agentpack.toml already pins it: the hint says so instead of asking for a pin.
    let err = world.fails_with(&["add", "acme/mono/skills/beta@^2.0"], &[]);
    assert!(err.contains("agentpack.toml wants version ^2.0"), "{err}");
    assert!(
        !err.contains("or pin github.com/acme/mono/skills/beta"),
        "{err}"
    );
    assert!(
        err.contains("agentpack.toml already pins github.com/acme/mono/skills/beta (version ^2.0)"),
        "{err}"
    );
}

#[test]
fn the_local_mirror_says_which_source_served_a_package() {
    let world = World::new();
    let mono = world.github.repo("acme", "mono");
    skill(&mono, "skills/beta", "beta");
    mono.commit("v1");
    mono.tag("v1.0.0");
    let parent = world.github.repo("acme", "parent");
    skill(&parent, "", "parent");
    parent.write(
        "agentpack.toml",
        "name = \"parent\"\nversion = \"1.0.0\"\n\n[dependencies]\n\"github.com/acme/mono/skills/beta\" = \"^1.0\"\n",
    );
    parent.commit("parent");
    let mirror = world
        .home
        .agentpack_home
        .join("local/acme/mono/skills/beta");
    write_dir_skill(&mirror, "beta-mirrored");
    world.init();

    // The transitive ^1.0 is served by the mirror: said once for the whole command.
    let (_, said) = world.ok(&["add", "acme/parent"]);
    let line = "github.com/acme/mono/skills/beta: served from the local mirror";
    assert_eq!(said.matches(line).count(), 1, "{said}");
    assert!(said.contains(&mirror.display().to_string()), "{said}");
    assert!(!said.contains("github.com/acme/parent: served"), "{said}");
    assert!(world
        .lock()
        .contains("url = \"local:acme/mono/skills/beta\""));

    let (_, said) = world.ok(&["sync"]);
    assert_eq!(said.matches(line).count(), 1, "{said}");
    let (stdout, _) = world.ok(&["sync", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["mirrored"],
        serde_json::json!([{
            "module": "github.com/acme/mono/skills/beta",
            "source": "local:acme/mono/skills/beta",
            "dir": mirror,
        }]),
        "{stdout}"
    );
}

#[test]
fn mcp_selectors_in_a_base_none_mode_enable_servers_of_every_source() {
    let world = World::new();
    world.write(
        "tools/.claude-plugin/plugin.json",
        r#"{"name": "tools", "version": "1.0.0"}"#,
    );
    world.write(
        "tools/.mcp.json",
        r#"{"mcpServers": {"plugsrv": {"command": "node", "args": ["${CLAUDE_PLUGIN_ROOT}/server.js"]}, "plugother": {"command": "node", "args": ["other.js"]}}}"#,
    );
    world.write("tools/server.js", "// the server\n");
    world.write(
        "tools/skills/tool-skill/SKILL.md",
        "---\nname: tool-skill\ndescription: t\n---\nT.\n",
    );
    world.write(
        ".agents/mcp.json",
        r#"{"mcpServers": {"agentsrv": {"command": "uvx", "args": ["agent-server"]}, "agentother": {"command": "uvx", "args": ["x"]}}}"#,
    );
    world.init();
    world.ok(&["add", "./tools"]);
    let mut manifest = world.manifest();
    manifest.push_str("\n[mcp.servers.mansrv]\ncommand = \"uvx\"\nargs = [\"man-server\"]\n\n[modes.lean]\nbase = \"none\"\nenable = [\"mcp:plugsrv\", \"mcp:agentsrv\", \"mcp:mansrv\"]\n");
    world.write("agentpack.toml", &manifest);
    world.ok(&["lock"]);
    world.ok(&["--mode", "lean", "sync"]);

    let modes = world.home.staging_root.join("modes");
    let lean = std::fs::read_dir(&modes)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("lean-")
        })
        .unwrap();
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(lean.join("opencode/opencode.json")).unwrap(),
    )
    .unwrap();
    let mut names: Vec<&str> = config["mcp"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["agentsrv", "mansrv", "plugsrv"], "{config}");
    // The plugin's server runs from the package's verified copy; nothing else of it is staged.
    let command = config["mcp"]["plugsrv"]["command"].to_string();
    assert!(
        command.contains("server.js") && !command.contains("${"),
        "{command}"
    );
    let script = command
        .split('"')
        .find(|part| part.ends_with("server.js"))
        .unwrap()
        .to_owned();
    assert!(Path::new(&script).is_file(), "{script}");
    let skill = "plugins/agentpack-bundle/skills/tool-skill/SKILL.md";
    assert!(
        world.staged().join(skill).is_file(),
        "the default mode stages it"
    );
    assert!(!lean.join(skill).exists());
}
