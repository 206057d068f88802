//! The real `agentpack` binary run by two unprivileged users (`apk-test-a`, `apk-test-b` in group
//! `apk-test`, made by `agentpack_test_support::users` when the tests run as root) sharing one
//! `AGENTPACK_HOME` set up as docs/src/shared-store.md says (issue 12): both can sync (the shared
//! `projects/` and `cache/.rebuildable/` are group-writable, defect 7), B cannot rename, unlink or
//! replace what A's pointer selects, B's `gc` keeps what A roots (defect 3), and `gc` run by a regular
//! user in their own store frees what it reports, as `du` measures it (defect 1).
//!
//! Without root the tests are skipped with a printed reason, and fail under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use agentpack_test_support::users::{
    du_bytes, require_test_users, set_mode, SharedTempDir, TestUser, TestUsers,
};
use agentpack_test_support::write_in;

/// The binary, where the test users can reach it (the build directory may be under root's private
/// home): a hard link (or copy) in `dir`.
fn bin_in(dir: &Path) -> PathBuf {
    let built = assert_cmd::cargo::cargo_bin("agentpack");
    let reachable = dir.join("agentpack");
    if !reachable.exists() && std::fs::hard_link(&built, &reachable).is_err() {
        std::fs::copy(&built, &reachable).unwrap();
    }
    reachable
}

/// One user's places: a private home, project and staging root, and the `AGENTPACK_HOME` they use.
struct Places {
    bin: PathBuf,
    home: PathBuf,
    project: PathBuf,
    staging: PathBuf,
    agentpack_home: PathBuf,
}

impl Places {
    /// Private (0700) places of `user` under `dir/<name>`; the package `pkg/` next to the project.
    fn new(dir: &Path, name: &str, user: &TestUser, agentpack_home: &Path) -> Places {
        let top = dir.join(name);
        std::fs::create_dir(&top).unwrap();
        let places = Places {
            bin: bin_in(dir),
            home: top.join("home"),
            project: top.join("project"),
            staging: top.join("staging"),
            agentpack_home: agentpack_home.to_path_buf(),
        };
        for path in [&places.home, &places.project, &places.staging] {
            std::fs::create_dir(path).unwrap();
        }
        write_in(
            &top.join("pkg"),
            "SKILL.md",
            &format!(
                "---\nname: skill-{name}\ndescription: {name}'s skill\n---\nGenuine {name}.\n"
            ),
        );
        chown_tree(&top, user);
        set_mode(&top, 0o700);
        places
    }
}

fn chown_tree(root: &Path, user: &TestUser) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        std::os::unix::fs::lchown(&path, Some(user.uid), Some(user.gid)).unwrap();
        if path.is_dir() && !path.is_symlink() {
            stack.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path()),
            );
        }
    }
}

/// `agentpack args` as `user` (or as root with `None`) in `places`.
fn run(user: Option<&TestUser>, places: &Places, args: &[&str]) -> Output {
    run_with(user, places, args, &[])
}

/// [`run`] with extra environment variables.
fn run_with(
    user: Option<&TestUser>,
    places: &Places,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Output {
    let mut command = match user {
        Some(user) => user.command(&places.bin),
        None => std::process::Command::new(&places.bin),
    };
    command.env_clear().current_dir(&places.project);
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
        .env("HOME", &places.home)
        .env("XDG_DATA_HOME", places.home.join(".local/share"))
        .env("XDG_CACHE_HOME", places.home.join(".cache"))
        .env("XDG_CONFIG_HOME", places.home.join(".config"))
        .env("AGENTPACK_HOME", &places.agentpack_home)
        .env("AGENTPACK_STAGING_ROOT", &places.staging)
        .env("AGENTPACK_GITHUB_API_URL", "http://127.0.0.1:9")
        .env("AGENTPACK_GITHUB_URL", "http://127.0.0.1:9")
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("NO_COLOR", "1")
        .envs(envs.iter().copied())
        .args(args)
        .output()
        .unwrap()
}

fn ok(user: Option<&TestUser>, places: &Places, args: &[&str]) -> String {
    let out = run(user, places, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "agentpack {args:?} as {:?} failed\nstdout:\n{stdout}\nstderr:\n{}",
        user.map(|u| &u.name),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The store paths (`v1/<32hex>-<label>`) of `store` owned by `uid`.
fn store_paths_of(v1: &Path, uid: u32) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(v1)
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.len() > 33 && name.as_bytes()[32] == b'-' && e.metadata().unwrap().uid() == uid
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Runs `program args` as `user`; `true` when it succeeded.
fn attempt(user: &TestUser, program: &str, args: &[&Path]) -> bool {
    user.command(program)
        .args(args)
        .output()
        .unwrap()
        .status
        .success()
}

/// The administrator's recipe: a group-owned `AGENTPACK_HOME` (`dir/shared`), setgid + sticky +
/// group-writable, opened once by root so root owns every shared directory; and A's and B's places.
fn shared_home(dir: &Path, users: &TestUsers) -> (PathBuf, Places, Places) {
    let shared = dir.join("shared");
    std::fs::create_dir_all(shared.join("cache/store")).unwrap();
    for path in [
        shared.clone(),
        shared.join("cache"),
        shared.join("cache/store"),
    ] {
        std::os::unix::fs::chown(&path, None, Some(users.gid)).unwrap();
        set_mode(&path, 0o3775);
    }
    let a = Places::new(dir, "a", &users.a, &shared);
    let b = Places::new(dir, "b", &users.b, &shared);
    ok(None, &a, &["store", "info"]);
    (shared, a, b)
}

#[test]
fn two_users_share_a_store_and_neither_can_tamper_with_the_other() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let (shared, a, b) = shared_home(dir.path(), &users);

    for (user, places) in [(&users.a, &a), (&users.b, &b)] {
        ok(Some(user), places, &["init", "--name", "demo"]);
        ok(Some(user), places, &["add", "../pkg"]);
        ok(Some(user), places, &["sync"]);
    }
    // Defect 7: both users' project state lives under the shared `projects/`.
    let projects = shared.join("projects");
    let mode = std::fs::metadata(&projects).unwrap().mode() & 0o7777;
    assert_eq!(mode & 0o3070, 0o3070, "projects/ is {mode:04o}");
    let owners: std::collections::BTreeSet<u32> = std::fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().uid())
        .collect();
    assert_eq!(owners, [users.a.uid, users.b.uid].into_iter().collect());

    // Defect 2: B cannot move, remove or replace any store path or blob of A's.
    let v1 = shared.join("cache/store/v1");
    let a_paths = store_paths_of(&v1, users.a.uid);
    assert!(a_paths.len() >= 2, "{a_paths:?}");
    for path in &a_paths {
        let aside = v1.join(format!(
            ".b-{}",
            path.file_name().unwrap().to_string_lossy()
        ));
        assert!(
            !attempt(&users.b, "mv", &[path, &aside]),
            "B moved {}",
            path.display()
        );
        assert!(!attempt(&users.b, "rm", &["-rf".as_ref(), path]));
        assert!(path.is_dir(), "{}", path.display());
    }
    let mut a_blobs = Vec::new();
    for shard in std::fs::read_dir(v1.join("blobs")).unwrap().flatten() {
        for blob in std::fs::read_dir(shard.path()).unwrap().flatten() {
            if blob.metadata().unwrap().uid() == users.a.uid {
                a_blobs.push(blob.path());
            }
        }
    }
    assert!(!a_blobs.is_empty());
    let forged = dir.path().join("forged");
    std::fs::write(&forged, "forged\n").unwrap();
    set_mode(&forged, 0o644);
    for blob in &a_blobs {
        assert!(!attempt(&users.b, "rm", &["-f".as_ref(), blob]));
        assert!(!attempt(&users.b, "mv", &["-f".as_ref(), &forged, blob]));
        assert!(blob.is_file());
    }

    // Defect 3: B's gc keeps everything A roots (A's pointer is in A's private staging root).
    let report = ok(
        Some(&users.b),
        &b,
        &["gc", "--json", "--keep-generations", "1"],
    );
    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(json["stale_roots_removed"], 0, "{report}");
    assert_eq!(json["generations_pruned"], 0, "{report}");
    assert!(
        json["roots"]["other_users"].as_u64().unwrap() >= 2,
        "{report}"
    );
    for path in &a_paths {
        assert!(path.is_dir(), "B's gc removed {}", path.display());
    }
    // A's next sync uses A's own store paths, unchanged.
    ok(Some(&users.a), &a, &["sync"]);
    let staged = std::process::Command::new("grep")
        .args(["-Rl", "Genuine a."])
        .arg(&a.staging)
        .output()
        .unwrap();
    assert!(staged.status.success(), "A's skill is not staged");
    let forged_staged = std::process::Command::new("grep")
        .args(["-Rl", "forged"])
        .arg(&a.staging)
        .output()
        .unwrap();
    assert!(!forged_staged.status.success());
    ok(Some(&users.a), &a, &["sync", "--verify-only"]);
}

#[test]
fn gc_as_a_regular_user_frees_what_du_sees_go() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let top = dir.path().join("a");
    let own_home = top.join("agentpack-home");
    let a = Places::new(dir.path(), "a", &users.a, &own_home);
    write_in(&top.join("pkg"), "big.bin", &"x".repeat(2 * 1024 * 1024));
    chown_tree(&top, &users.a);
    set_mode(&top, 0o700);
    ok(Some(&users.a), &a, &["init", "--name", "demo"]);
    ok(Some(&users.a), &a, &["add", "../pkg"]);
    ok(Some(&users.a), &a, &["sync"]);
    ok(Some(&users.a), &a, &["remove", "pkg"]);
    ok(Some(&users.a), &a, &["sync"]);
    // The package copy and the generation that used it are unused now.
    let store = own_home.join("cache/store");
    let before = du_bytes(&store);
    let json = ok(
        Some(&users.a),
        &a,
        &["gc", "--json", "--keep-generations", "1"],
    );
    let after = du_bytes(&store);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let report = report.get("data").unwrap_or(&report);
    let freed = report["bytes_freed"].as_u64().unwrap();
    let removed = report["store_paths_removed"].as_array().unwrap();
    println!("du {before} -> {after}, gc says {freed} freed, removed {removed:?}");
    assert!(
        report["not_removed"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(!removed.is_empty(), "{report}");
    assert!(freed > 2 * 1024 * 1024, "{report}");
    assert!(
        (before - after).abs_diff(freed) <= 16 * 1024,
        "gc said {freed} bytes freed, du saw {}",
        before - after
    );
    for name in removed {
        assert!(!store.join("v1").join(name.as_str().unwrap()).exists());
    }
}

/// Defect 7: the Codex home fallback `/var/tmp/ap-c/` (used when the staging root is too long for
/// Codex's control socket) is shared like `/tmp`, so the second user's Codex launch works too.
#[test]
fn two_users_launch_codex_from_the_shared_fallback_directory() {
    let Some(users) = require_test_users() else {
        return;
    };
    let base = Path::new("/var/tmp/ap-c");
    if let Ok(meta) = std::fs::symlink_metadata(base) {
        if meta.mode() & 0o7777 != 0o1777 {
            // Left by an earlier agentpack as its first user's private directory: as root, as the
            // documentation says.
            assert_eq!(
                meta.uid(),
                0,
                "{} belongs to uid {}",
                base.display(),
                meta.uid()
            );
            set_mode(base, 0o1777);
        }
    }
    let dir = SharedTempDir::new();
    for (name, user) in [("a", &users.a), ("b", &users.b)] {
        let own_home = dir.path().join(name).join("agentpack-home");
        let mut places = Places::new(dir.path(), name, user, &own_home);
        // Too long for Codex's socket: the home goes to the fallback.
        places.staging = dir
            .path()
            .join(name)
            .join(format!("staging-{}", "x".repeat(60)));
        let bin = dir.path().join(name).join("bin");
        write_in(&bin, "codex", "#!/bin/sh\nexit 0\n");
        set_mode(&bin.join("codex"), 0o755);
        std::fs::create_dir(&places.staging).unwrap();
        chown_tree(&dir.path().join(name), user);
        ok(Some(user), &places, &["init", "--name", "demo"]);
        ok(Some(user), &places, &["add", "../pkg"]);
        ok(Some(user), &places, &["sync"]);
        let codex = bin.join("codex");
        let out = run_with(
            Some(user),
            &places,
            &["codex"],
            &[("CODEX_PATH", codex.to_str().unwrap())],
        );
        assert!(
            out.status.success(),
            "codex as {} failed: {}",
            user.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta = std::fs::symlink_metadata(base).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o1777);
    let owners: std::collections::BTreeSet<u32> = std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().uid())
        .collect();
    assert!(
        owners.contains(&users.a.uid) && owners.contains(&users.b.uid),
        "{owners:?}"
    );
    // The test users' Codex homes go with the test.
    for entry in std::fs::read_dir(base).unwrap().flatten() {
        let uid = entry.metadata().unwrap().uid();
        if uid == users.a.uid || uid == users.b.uid {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Defect 2 through objects B published legitimately and then changed in place (B owns them, so the
/// sticky bit does not stop B): a package store path and its blobs holding the bytes of a package A
/// adds later. A's sync and A's launcher never hand B's bytes to A's agent (A either builds from
/// its own verified copy or refuses, naming B). Then the administrator's root `gc` (the documented
/// whole-store collection) removes B's unused objects and keeps what A's private pointer selects.
#[test]
fn a_members_own_objects_changed_in_place_never_reach_another_member_and_root_gc_keeps_roots() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let (shared, a, b) = shared_home(dir.path(), &users);
    // One package directory both can read (root's, 0755/0644): the same bytes for both.
    let common = dir.path().join("common-pkg");
    write_in(
        &common,
        "SKILL.md",
        "---\nname: common\ndescription: the shared skill\n---\nShared genuine.\n",
    );
    set_mode(&common, 0o755);
    set_mode(&common.join("SKILL.md"), 0o644);
    let common_arg = common.to_str().unwrap();
    // The administrator works from a directory of its own (in a project, a repair also rebuilds
    // that project).
    let admin_top = dir.path().join("admin");
    let admin = Places {
        bin: a.bin.clone(),
        home: admin_top.join("home"),
        project: admin_top.join("work"),
        staging: admin_top.join("staging"),
        agentpack_home: shared.clone(),
    };
    for path in [&admin.home, &admin.project, &admin.staging] {
        std::fs::create_dir_all(path).unwrap();
    }

    // B publishes it first, then changes its own store copy (and so its blob) in place.
    ok(Some(&users.b), &b, &["init", "--name", "demo"]);
    ok(Some(&users.b), &b, &["add", common_arg]);
    ok(Some(&users.b), &b, &["add", "../pkg"]);
    ok(Some(&users.b), &b, &["sync"]);
    let v1 = shared.join("cache/store/v1");
    let b_paths = store_paths_of(&v1, users.b.uid);
    let mut changed = 0;
    for path in &b_paths {
        let skill = path.join("SKILL.md");
        if std::fs::read_to_string(&skill).is_ok_and(|text| text.contains("Shared genuine.")) {
            let script = format!(
                "chmod u+w {dir} {skill} && printf -- '---\\nname: common\\ndescription: x\\n---\\nforged by b\\n' > {skill}",
                dir = path.display(),
                skill = skill.display()
            );
            assert!(
                attempt(&users.b, "sh", &["-c".as_ref(), script.as_ref()]),
                "B could not change its own {}",
                skill.display()
            );
            changed += 1;
        }
    }
    assert!(
        changed >= 1,
        "B's copy of the package was not found in {b_paths:?}"
    );

    // A adds the same package: A's staging and A's agent never see B's bytes.
    ok(Some(&users.a), &a, &["init", "--name", "demo"]);
    let added = run(Some(&users.a), &a, &["add", common_arg]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&added.stdout),
        String::from_utf8_lossy(&added.stderr)
    );
    println!("A's add:\n{said}");
    if !added.status.success() {
        // Refusing is allowed (a denial of service the administrator resolves), using B's bytes is
        // not; the error itself (not only a warning before it) names B's path, its owner and the
        // remedy.
        let error = &said[said.find("error:").unwrap_or(0)..];
        assert!(
            error.contains("does not match its name")
                && error.contains(&format!("uid {}", users.b.uid))
                && error.contains("store verify --repair` as root"),
            "A's add failed without naming B's changed path and the remedy:\n{said}"
        );
        // The remedy: the administrator repairs the store as root; then A's add goes ahead.
        let repaired = run(None, &admin, &["store", "verify", "--repair"]);
        println!(
            "root's repair:\n{}{}",
            String::from_utf8_lossy(&repaired.stdout),
            String::from_utf8_lossy(&repaired.stderr)
        );
        ok(Some(&users.a), &a, &["add", common_arg]);
    }
    let forged_staged = std::process::Command::new("grep")
        .args(["-RlI", "forged by b"])
        .arg(&a.staging)
        .output()
        .unwrap();
    assert!(
        forged_staged.stdout.is_empty(),
        "B's bytes are staged for A: {}",
        String::from_utf8_lossy(&forged_staged.stdout)
    );
    let bin = a.home.join("bin");
    let saw = a.home.join("claude-saw.txt");
    write_in(
        &bin,
        "claude",
        &format!(
            "#!/bin/sh\ncat \"$2\"/skills/*/SKILL.md > {}\n",
            saw.display()
        ),
    );
    set_mode(&bin.join("claude"), 0o755);
    chown_tree(&a.home, &users.a);
    let claude = bin.join("claude");
    // A launches Claude Code (a stand-in that records the skills it was given): A's bytes only.
    let launch_and_check = || {
        let launched = run_with(
            Some(&users.a),
            &a,
            &["claude"],
            &[("CLAUDE_PATH", claude.to_str().unwrap())],
        );
        assert!(
            launched.status.success(),
            "{}",
            String::from_utf8_lossy(&launched.stderr)
        );
        let seen = std::fs::read_to_string(&saw).unwrap();
        assert!(seen.contains("Shared genuine."), "A's agent saw: {seen}");
        assert!(!seen.contains("forged"), "A's agent saw B's bytes: {seen}");
    };
    launch_and_check();
    ok(Some(&users.a), &a, &["sync", "--verify-only"]);

    // B drops its packages; B's own `pkg` copy is unused by anyone now.
    ok(Some(&users.b), &b, &["remove", "common-pkg"]);
    ok(Some(&users.b), &b, &["remove", "pkg"]);
    ok(Some(&users.b), &b, &["sync"]);
    let a_selected = std::fs::canonicalize(a.staging.join("modes/default")).unwrap();
    let b_unused: Vec<PathBuf> = store_paths_of(&v1, users.b.uid)
        .into_iter()
        .filter(|p| {
            p.to_string_lossy().ends_with("-pkg") && !p.to_string_lossy().ends_with("-common-pkg")
        })
        .collect();
    assert_eq!(b_unused.len(), 1, "B's own package copy: {b_unused:?}");
    // A's gc keeps B's history (and so B's old generation using that copy), and what it finds
    // unused but cannot remove (B's blobs) it lists with their owner, counts none of it, and says
    // who may remove it.
    let out = run(
        Some(&users.a),
        &a,
        &["gc", "--json", "--keep-generations", "1"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let json = json.get("data").unwrap_or(&json).clone();
    for path in &b_unused {
        assert!(path.is_dir(), "A's gc removed B's {}", path.display());
    }
    assert_eq!(
        json["generations_pruned"], 0,
        "A's gc pruned B's history: {json}"
    );
    let not_removed = json["not_removed"].as_array().unwrap();
    assert!(!not_removed.is_empty(), "{json}");
    for item in not_removed {
        assert_eq!(item["owner"], users.b.uid, "{json}");
        let path = Path::new(item["path"].as_str().unwrap());
        assert!(
            path.exists(),
            "listed as not removed, but gone: {}",
            path.display()
        );
    }
    let b_names: Vec<String> = store_paths_of(&v1, users.b.uid)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let removed = json["store_paths_removed"].as_array().unwrap();
    assert!(
        !removed
            .iter()
            .any(|name| b_names.iter().any(|b| Some(b.as_str()) == name.as_str())),
        "A's gc counts B's paths as removed: {json}"
    );
    let warning = String::from_utf8_lossy(&out.stderr);
    assert!(
        warning.contains(&format!("uid {}", users.b.uid)) && warning.contains("as root"),
        "no remedy: {warning}"
    );
    // The administrator's gc judges every member's roots and prunes every history: B's copy goes.
    let report = ok(None, &admin, &["gc", "--json", "--keep-generations", "1"]);
    let json: serde_json::Value = serde_json::from_str(&report).unwrap();
    let json = json.get("data").unwrap_or(&json);
    println!("root's gc: {json}");
    assert!(
        json["not_removed"].as_array().unwrap().is_empty(),
        "root could not remove: {report}"
    );
    assert!(
        a_selected.is_dir(),
        "root's gc removed what A's pointer selects"
    );
    for path in &b_unused {
        assert!(
            !path.exists(),
            "root's gc kept B's unused {}",
            path.display()
        );
    }
    ok(Some(&users.a), &a, &["sync", "--verify-only"]);
    launch_and_check();
}

/// The slot "create": B plants a cache slot under the key A's package will use (learned from an
/// earlier sync of A's, the slot gone since), pointing at a store path of B's holding other bytes.
/// A's next sync re-hashes what the slot selects against A's lock and never stages B's bytes: it
/// either uses its own copy or refuses, naming the slot.
#[test]
fn a_slot_another_member_planted_is_never_used() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let (shared, a, b) = shared_home(dir.path(), &users);
    ok(Some(&users.a), &a, &["init", "--name", "demo"]);
    ok(Some(&users.a), &a, &["add", "../pkg"]);
    let lock = std::fs::read_to_string(a.project.join("pack.lock")).unwrap();
    let key = lock
        .lines()
        .find_map(|line| line.strip_prefix("cache_key = \""))
        .map(|rest| rest.trim_end_matches('"').to_owned())
        .unwrap();
    let slot = shared.join("cache").join(&key);
    // A's slot goes (A removes its own, as gc of an unused path package would).
    assert!(attempt(&users.a, "rm", &["-f".as_ref(), slot.as_ref()]));
    // B's package with other bytes, and B's slot under A's key pointing at it.
    ok(Some(&users.b), &b, &["init", "--name", "demo"]);
    ok(Some(&users.b), &b, &["add", "../pkg"]);
    let b_lock = std::fs::read_to_string(b.project.join("pack.lock")).unwrap();
    let b_key = b_lock
        .lines()
        .find_map(|line| line.strip_prefix("cache_key = \""))
        .map(|rest| rest.trim_end_matches('"').to_owned())
        .unwrap();
    let b_target = std::fs::read_link(shared.join("cache").join(&b_key)).unwrap();
    assert!(attempt(
        &users.b,
        "ln",
        &["-s".as_ref(), b_target.as_ref(), slot.as_ref()]
    ));
    assert_eq!(std::fs::symlink_metadata(&slot).unwrap().uid(), users.b.uid);

    let synced = run(Some(&users.a), &a, &["sync"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&synced.stdout),
        String::from_utf8_lossy(&synced.stderr)
    );
    println!("A's sync over B's slot:\n{said}");
    let staged = std::process::Command::new("grep")
        .args(["-RlI", "Genuine b."])
        .arg(&a.staging)
        .output()
        .unwrap();
    assert!(
        staged.stdout.is_empty(),
        "B's bytes are staged for A: {}",
        String::from_utf8_lossy(&staged.stdout)
    );
    if synced.status.success() {
        let genuine = std::process::Command::new("grep")
            .args(["-RlI", "Genuine a."])
            .arg(&a.staging)
            .output()
            .unwrap();
        assert!(
            !genuine.stdout.is_empty(),
            "A's skill is not staged:\n{said}"
        );
        ok(Some(&users.a), &a, &["sync", "--verify-only"]);
    } else {
        // A denial of service the threat model allows, said as what it is: B's slot, B's uid.
        assert!(
            said.contains(&key)
                && said.contains(&format!("uid {}", users.b.uid))
                && said.contains("Ask its owner to remove it"),
            "A's sync failed without naming the slot, its owner and the remedy:\n{said}"
        );
        assert!(!said.contains("group lacks write access"), "{said}");
    }
}
