//! Staging as generations, through the real binary: unchanged inputs build nothing, modes are their own
//! generations, a failed build leaves the selected generation alone, rollback, and the staged-file
//! checks of `sync --verify-only` and a plain sync.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::{IsolatedHome, Run};

struct Project {
    home: IsolatedHome,
}

impl Project {
    /// A project with two path packages (a skill and a plugin), synced.
    fn synced() -> Self {
        let home = IsolatedHome::new();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let project = Self { home };
        project.ok(&["init", "--name", "staging"]);
        project.ok(&[
            "add",
            examples.join("hello-skill").to_str().unwrap(),
            "--no-sync",
        ]);
        project.ok(&[
            "add",
            examples.join("review-plugin").to_str().unwrap(),
            "--no-sync",
        ]);
        project.ok(&["sync"]);
        project
    }

    fn run(&self, args: &[&str]) -> Output {
        let bin = assert_cmd::cargo::cargo_bin("agentpack");
        self.home.command(&bin, None).args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        Run::new(args, self.run(args)).assert_ok().text()
    }

    fn fails(&self, args: &[&str]) -> String {
        Run::new(args, self.run(args)).assert_refused().stderr
    }

    fn pointer(&self, mode_dir: &str) -> PathBuf {
        self.home.staging_root.join("modes").join(mode_dir)
    }

    fn target(&self, mode_dir: &str) -> PathBuf {
        std::fs::read_link(self.pointer(mode_dir)).unwrap()
    }

    fn store_paths(&self) -> Vec<String> {
        let dir = self.home.agentpack_home.join("cache/store/v1");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.len() > 33 && name.as_bytes()[32] == b'-')
            .collect();
        names.sort();
        names
    }

    fn overlay(&self, relative: &str, text: &str) {
        let path = self.home.project.join(".agents").join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[test]
fn a_second_sync_with_unchanged_inputs_builds_nothing() {
    let project = Project::synced();
    let before = project.store_paths();
    let target = project.target("default");
    assert!(target
        .join("plugins/agentpack-bundle/skills/hello-skill/SKILL.md")
        .is_file());
    project.ok(&["sync"]);
    assert_eq!(project.store_paths(), before, "no new store path");
    assert_eq!(project.target("default"), target);
}

#[test]
fn modes_are_their_own_generations() {
    let project = Project::synced();
    project.ok(&["mode", "create", "lean", "--base", "none"]);
    project.ok(&["mode", "enable", "lean", "package:hello-skill"]);
    let manifest = std::fs::read_to_string(project.home.project.join("agentpack.toml")).unwrap();
    assert!(manifest.contains("[modes.lean]"), "{manifest}");
    let shown = project.ok(&["mode", "show", "lean", "--json"]);
    assert!(
        shown.contains("\"schema_version\": 1") && shown.contains("package:hello-skill"),
        "{shown}"
    );

    let default_target = project.target("default");
    project.ok(&["--mode", "lean", "sync"]);
    let lean_dir = std::fs::read_dir(project.home.staging_root.join("modes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|name| name.starts_with("lean-"))
        .expect("the lean pointer");
    let lean = project.target(&lean_dir);
    assert_ne!(lean, default_target);
    assert!(lean
        .join("plugins/agentpack-bundle/skills/hello-skill/SKILL.md")
        .is_file());
    assert!(
        !lean
            .join("plugins/agentpack-bundle/commands/review.md")
            .exists(),
        "the plugin is not enabled"
    );
    assert_eq!(
        project.target("default"),
        default_target,
        "another mode is not rebuilt"
    );

    let err = project.fails(&["--mode", "nosuch", "sync"]);
    assert!(err.contains("mode `nosuch` is not declared"), "{err}");
    let err = project.fails(&["mode", "delete", "default"]);
    assert!(err.contains("default"), "{err}");
}

#[test]
fn a_failed_build_leaves_the_selected_generation_and_rollback_switches_back() {
    let project = Project::synced();
    let first = project.target("default");

    project.overlay(
        "skills/local/SKILL.md",
        "---\nname: local\ndescription: a local skill\n---\nLocal.\n",
    );
    project.ok(&["sync"]);
    let second = project.target("default");
    assert_ne!(first, second, "the overlay is an input");
    assert!(second
        .join("plugins/agentpack-bundle/skills/local/SKILL.md")
        .is_file());

    // A FIFO in the overlay cannot be staged: the sync fails and the pointer stays.
    let fifo = project.home.project.join(".agents/skills/local/pipe");
    nix_mkfifo(&fifo);
    project.fails(&["sync"]);
    assert_eq!(project.target("default"), second);
    std::fs::remove_file(&fifo).unwrap();

    project.ok(&["rollback"]);
    assert_eq!(project.target("default"), first);
    let listed = project.ok(&["rollback", "--list"]);
    assert!(listed.lines().any(|l| l.starts_with('*')), "{listed}");
    project.ok(&["rollback"]);
    assert_eq!(
        project.target("default"),
        second,
        "a second rollback returns"
    );
    let err = project.fails(&["rollback", "--to", "9"]);
    assert!(err.contains("cannot go 9 back"), "{err}");
}

fn nix_mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn verify_only_names_changed_staged_files_and_sync_restores_them() {
    let project = Project::synced();
    let output = project.run(&["--json", "sync", "--verify-only"]);
    assert!(output.status.success());
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["verified"], true);
    assert_eq!(report["mode"], "default");
    assert_eq!(
        project.target("default").file_name().unwrap().to_str(),
        report["generation"].as_str()
    );
    // A generated file (not shared with a package): the OpenCode config.
    let staged = project.pointer("default").join("opencode/opencode.json");
    let real = std::fs::canonicalize(&staged).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut text = std::fs::read_to_string(&real).unwrap();
    text.push_str("\n// edited\n");
    std::fs::write(&real, text).unwrap();

    let err = project.fails(&["sync", "--verify-only"]);
    assert!(
        err.contains("staged tree does not match the last sync"),
        "{err}"
    );
    let json_err = project.fails(&["--json", "sync", "--verify-only"]);
    assert!(
        json_err.contains("staged tree does not match"),
        "{json_err}"
    );
    assert!(
        err.contains(&format!("modified  {}", staged.display())),
        "{err}"
    );
    assert!(err.contains("fix       agentpack sync"), "{err}");

    let said = project.ok(&["sync"]);
    assert!(
        said.contains("staged file(s) changed since the last sync and were replaced"),
        "{said}"
    );
    assert!(said.contains("opencode.json"), "{said}");
    project.ok(&["sync", "--verify-only"]);
    assert!(!std::fs::read_to_string(&staged)
        .unwrap()
        .contains("// edited"));
}

#[test]
fn dry_run_writes_nothing() {
    let project = Project::synced();
    let lock = std::fs::read_to_string(project.home.project.join("pack.lock")).unwrap();
    let before = project.store_paths();
    let out = project.ok(&["sync", "--dry-run", "--json"]);
    assert!(out.contains("\"dry_run\": true"), "{out}");
    assert_eq!(project.store_paths(), before);
    // With every package in the store the whole plan is there: the generation it names is the one
    // the last sync selected (same inputs), and every agent's files name their package.
    let report = Run::new(&["sync"], project.run(&["--json", "sync", "--dry-run"]))
        .assert_ok()
        .json();
    let plan = &report["plan"];
    let selected = project.target("default");
    assert_eq!(
        plan["generation"].as_str(),
        selected.file_name().and_then(|name| name.to_str()),
        "{report:#}"
    );
    let claude = plan["files"]["claude"].as_array().unwrap();
    assert!(
        claude
            .iter()
            .any(|file| file["layer"] == "package" && file["package"].is_string()),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(project.home.project.join("pack.lock")).unwrap(),
        lock
    );
}

#[test]
fn gc_keeps_selected_generations_and_collects_the_rest() {
    let project = Project::synced();
    for index in 0..4 {
        project.overlay("rules/x.md", &format!("rule {index}\n"));
        project.ok(&["sync"]);
    }
    let current = project.target("default");
    let report = project.ok(&["gc", "--keep-generations", "1", "--json"]);
    assert!(report.contains("\"store_paths_removed\""), "{report}");
    assert!(current.is_dir(), "the selected generation survives gc");
    project.ok(&["sync", "--verify-only"]);
    let names = project.store_paths();
    assert_eq!(
        names.iter().filter(|n| n.contains("-generation-")).count(),
        1,
        "older generations are collected: {names:?}"
    );
    project.ok(&["store", "verify"]);
}

/// A sync removes the default-location staging trees (`$TMPDIR/agentpack-<hash>/`) of projects that
/// no longer exist, and only those.
#[test]
fn staging_trees_of_projects_that_are_gone_are_removed() {
    let home = IsolatedHome::new();
    let tmp = home.home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let run = |project: &Path, args: &[&str]| {
        let output = home
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .env_remove("AGENTPACK_STAGING_ROOT")
            .env("TMPDIR", &tmp)
            .current_dir(project)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let staging_trees = || {
        let mut names: Vec<String> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let gone = home.home.join("gone-project");
    for project in [&home.project, &gone] {
        std::fs::create_dir_all(project).unwrap();
        run(project, &["init", "--name", "p"]);
        run(
            project,
            &["add", examples.join("hello-skill").to_str().unwrap()],
        );
    }
    let foreign = tmp.join("agentpack-0123456789abcdef");
    std::fs::create_dir_all(&foreign).unwrap();
    assert_eq!(staging_trees().len(), 3, "{:?}", staging_trees());
    let marker = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path().join(".agentpack-project"))
        .filter(|m| m.is_file())
        .count();
    assert_eq!(marker, 2, "each sync records its project");

    std::fs::remove_dir_all(&gone).unwrap();
    run(&home.project, &["sync"]);
    let left = staging_trees();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.contains(&"agentpack-0123456789abcdef".to_string()),
        "unmarked trees stay"
    );
    let own = std::fs::read_to_string(tmp.join(&left[1]).join(".agentpack-project"))
        .or_else(|_| std::fs::read_to_string(tmp.join(&left[0]).join(".agentpack-project")))
        .unwrap();
    assert_eq!(
        own.trim_end(),
        std::fs::canonicalize(&home.project)
            .unwrap()
            .to_string_lossy()
    );
}

/// A staging root serves one project: a second project pointed at the same AGENTPACK_STAGING_ROOT
/// is refused before anything changes (it would switch the first one's pointers), until the first
/// project is gone.
#[test]
fn two_projects_cannot_share_one_staging_root() {
    let project = Project::synced();
    let first = project.target("default");
    let other = project.home.home.join("other-project");
    std::fs::create_dir_all(&other).unwrap();
    let run_other = |args: &[&str]| {
        project
            .home
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
            .current_dir(&other)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(run_other(&["init", "--name", "other"]).status.success());
    let refused = run_other(&["sync"]);
    assert!(!refused.status.success());
    assert!(refused.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("holds the staging of another project")
            && stderr.contains(
                &*std::fs::canonicalize(&project.home.project)
                    .unwrap()
                    .to_string_lossy()
            )
            && stderr.contains("AGENTPACK_STAGING_ROOT"),
        "{stderr}"
    );
    assert_eq!(
        project.target("default"),
        first,
        "the first project's pointer is untouched"
    );
    project.ok(&["sync", "--verify-only"]);

    // Once the first project is gone, its staging root can serve another.
    std::fs::remove_dir_all(&project.home.project).unwrap();
    let taken = run_other(&["sync"]);
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
}

#[test]
fn rollback_of_an_undeclared_mode_is_an_error() {
    let project = Project::synced();
    let err = project.fails(&["--mode", "nosuchmode", "rollback", "--list"]);
    assert!(
        err.contains("mode `nosuchmode` is not declared") && err.contains("fix"),
        "{err}"
    );
}

/// AGENTPACK_REQUIRE_VERIFIED judges the committed lock: one with packages that have no content
/// hash (a lockfile version 2) is refused before anything rewrites it.
#[test]
fn require_verified_refuses_a_lock_without_content_hashes_and_leaves_it() {
    let project = Project::synced();
    let lock_path = project.home.project.join("pack.lock");
    let text = std::fs::read_to_string(&lock_path).unwrap();
    let stripped: String = text
        .lines()
        .filter(|line| !line.starts_with("content_hash"))
        .map(|line| {
            if line.starts_with("lockfile_version") {
                "lockfile_version = 2".to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    assert_ne!(stripped, text, "the lock had content hashes");
    std::fs::write(&lock_path, &stripped).unwrap();
    let output = project
        .home
        .command(&assert_cmd::cargo::cargo_bin("agentpack"), None)
        .env("AGENTPACK_REQUIRE_VERIFIED", "1")
        .arg("sync")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no content hash") && stderr.contains("AGENTPACK_REQUIRE_VERIFIED"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), stripped);
}

/// A path package is copied again from its directory on every sync, so its old copies are not
/// kept by their slots: after three edits, gc gives back all but the copy the selected generation
/// uses (a reviewer found 30 edits of 2 MB each that no gc could reclaim).
#[test]
fn gc_reclaims_old_copies_of_an_edited_path_package() {
    let home = IsolatedHome::new();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let run = |args: &[&str]| {
        let output = home.command(&bin, None).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let package = home.home.join("local-skill");
    std::fs::create_dir_all(&package).unwrap();
    let edit = |n: usize| {
        std::fs::write(
            package.join("SKILL.md"),
            format!(
                "---\nname: local-skill\ndescription: Edit {n}.\n---\n{}\n",
                "x".repeat(n * 1000)
            ),
        )
        .unwrap();
    };
    edit(1);
    run(&["init", "--name", "edits"]);
    run(&["add", package.to_str().unwrap()]);
    for n in 2..=4 {
        edit(n);
        run(&["sync"]);
    }
    let report: serde_json::Value =
        serde_json::from_str(&run(&["--json", "gc", "--keep-generations", "0"])).unwrap();
    assert_eq!(report["rebuildable_slots_removed"], 3, "{report}");
    assert_eq!(report["roots"]["rebuildable_slots_kept"], 1, "{report}");
    let removed = report["store_paths_removed"].as_array().unwrap();
    assert!(
        removed
            .iter()
            .filter(|p| p.as_str().unwrap().contains("local-skill"))
            .count()
            >= 3,
        "{report}"
    );
    // The selected generation still verifies, and the next sync changes nothing.
    let before = std::fs::read_link(home.staging_root.join("modes/default")).unwrap();
    run(&["sync", "--verify-only"]);
    run(&["sync"]);
    assert_eq!(
        std::fs::read_link(home.staging_root.join("modes/default")).unwrap(),
        before
    );
}

/// Deleting a mode takes its pointer and its history with it, so `gc` can collect its generations.
#[test]
fn a_deleted_modes_generations_can_be_collected() {
    let project = Project::synced();
    project.ok(&["mode", "create", "review", "--base", "none"]);
    project.ok(&["--mode", "review", "sync"]);
    let pointers: Vec<_> = std::fs::read_dir(project.home.staging_root.join("modes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("review-"))
        .collect();
    assert_eq!(pointers.len(), 1, "{pointers:?}");
    project.ok(&["mode", "delete", "review"]);
    assert!(!project
        .home
        .staging_root
        .join("modes")
        .join(&pointers[0])
        .exists());
    let report = project.ok(&["gc", "--json"]);
    assert!(report.contains("generation-review-"), "{report}");
    // The default mode is untouched.
    project.ok(&["sync", "--verify-only"]);
}
