//! The store used by users other than root, and by two users sharing one group, as real processes with
//! other uids: when the tests run as root they run this test binary again under
//! `setpriv --reuid=... --regid=... --clear-groups` (util-linux) with `--ignored --exact
//! multi_user::run_as_other_user` and a scenario name; otherwise they are skipped with a printed reason (root
//! hides permission problems, so the scenarios only mean something as another uid). Also: a link mode
//! the store's filesystem cannot do warns once through `Store::take_warnings`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;
use agentpack_test_support::skip;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use agentpack_store::{
    hash_tree, tables, verify, LinkMode, PlannedFile, Source, Store, StoreError, StoreOptions,
    StorePathName, VerifyOptions, LINK_MODE_ENV,
};
use common::{open_store, package_tree, write, TestDir};

/// uid of the first other user (nobody).
const USER_A: u32 = 65534;
/// uid of the second other user.
const USER_B: u32 = 65533;
/// The group both share in the shared-store scenario.
const TEAM: u32 = 65530;

const SCENARIO_ENV: &str = "AGENTPACK_TEST_SCENARIO";
const CACHE_ENV: &str = "AGENTPACK_TEST_CACHE";

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Why the other-user scenarios cannot run here, if they cannot.
fn cannot_switch_users() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not running as root, so no other uid can be used".to_owned());
    }
    match Command::new("setpriv").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        _ => Some("setpriv (util-linux) is not installed".to_owned()),
    }
}

/// Run `scenario` of [`run_as_other_user`] in this test binary as `uid`:`gid` with no other groups;
/// panics with its output when it fails.
fn run_as(uid: u32, gid: u32, scenario: &str, cache: &Path) -> String {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(exe)
        .args([
            "--ignored",
            "--exact",
            "multi_user::run_as_other_user",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO_ENV, scenario)
        .env(CACHE_ENV, cache)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "scenario {scenario} as uid {uid} gid {gid} failed:\n{text}"
    );
    assert!(
        text.contains("1 passed"),
        "scenario {scenario} did not run:\n{text}"
    );
    text
}

/// A test directory every user can enter.
fn open_test_dir() -> TestDir {
    let dir = TestDir::new();
    chmod(dir.path(), 0o755);
    dir
}

/// Replace `relative` in the published tree `root` with other content (as the tree's owner).
fn damage(root: &Path, relative: &str) {
    let file = root.join(relative);
    let parent = file.parent().unwrap().to_path_buf();
    chmod(&parent, 0o755);
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, b"changed in place\n").unwrap();
    chmod(&file, 0o444);
    chmod(&parent, 0o555);
}

fn assert_sealed(root: &Path) {
    assert_eq!(mode(root), 0o555, "{}", root.display());
    for entry in walk_dirs(root) {
        assert_eq!(mode(&entry), 0o555, "{}", entry.display());
    }
}

fn walk_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                out.push(entry.path());
                stack.push(entry.path());
            }
        }
    }
    out
}

fn open_shared(cache: &Path) -> Store {
    Store::open(
        cache,
        StoreOptions {
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// Publishes by every path as a user who is not root: a package, a repair, input-addressed paths built
/// by a closure and assembled from a plan, and `verify --repair` of a path changed in place.
fn scenario_publish_as_non_root(cache: &Path) {
    let store = open_store(cache.parent().unwrap(), LinkMode::Auto);
    let src = cache.parent().unwrap().join("src");
    package_tree(&src, "user");
    let expected = hash_tree(&src).unwrap();
    let path = store.publish_tree(&src, "demo", Some(&expected)).unwrap();
    assert_sealed(path.path());
    assert_eq!(hash_tree(path.path()).unwrap(), expected);

    damage(path.path(), "engineering/skills/x/SKILL.md");
    let repaired = store.repair_tree(&src, "demo", Some(&expected)).unwrap();
    assert_eq!(repaired, path);
    assert_eq!(hash_tree(path.path()).unwrap(), expected);
    assert_sealed(path.path());

    let name: StorePathName = format!("{}-generation", "1".repeat(32)).parse().unwrap();
    let built = store
        .publish_built(&name, std::slice::from_ref(&path), |out, _final| {
            std::fs::create_dir_all(out.join("skills/a"))?;
            std::fs::write(out.join("skills/a/SKILL.md"), b"a\n")?;
            Ok(())
        })
        .unwrap();
    assert_sealed(built.path());

    let name: StorePathName = format!("{}-files", "2".repeat(32)).parse().unwrap();
    let plan = [
        PlannedFile::new("deep/dir/file.txt", Source::Bytes(b"f\n".to_vec()), false),
        PlannedFile::new("link", Source::Symlink("deep/dir".to_owned()), false),
    ];
    let files = store.publish_files(&name, &plan, &[]).unwrap();
    assert_sealed(files.path());

    damage(path.path(), "SKILL.md");
    let report = verify(&store, VerifyOptions { repair: true }).unwrap();
    assert!(!report.is_clean(), "the change in place was not found");
    assert_eq!(hash_tree(path.path()).unwrap(), expected);
    assert_sealed(path.path());
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    let leftovers: Vec<_> = std::fs::read_dir(store.store_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".repair-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(store.take_warnings(), Vec::<String>::new());
}

/// One member of the group publishes, records in the index and repairs: everything shared is made
/// group read/write.
fn scenario_shared_member(cache: &Path, variant: &str) {
    let store = open_shared(cache);
    let src = tempfile::tempdir().unwrap();
    package_tree(src.path(), variant);
    let path = store.publish_tree(src.path(), variant, None).unwrap();
    assert_sealed(path.path());
    let index = store.index().expect("the index opens for every member");
    index.put(tables::REFS, variant.as_bytes(), b"x").unwrap();
    assert_eq!(
        index.get(tables::REFS, variant.as_bytes()).unwrap(),
        Some(b"x".to_vec())
    );
    // Exclusive store lock.
    verify(&store, VerifyOptions { repair: true }).unwrap();
    assert_eq!(store.take_warnings(), Vec::<String>::new());
}

/// A user outside the store's group is told why the lock cannot be taken and what to do.
fn scenario_locked_out(cache: &Path) -> String {
    let store = open_shared(cache);
    let src = tempfile::tempdir().unwrap();
    write(src.path(), "a.txt", b"a\n");
    let err = store.publish_tree(src.path(), "demo", None).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Lock { .. }), "{message}");
    assert!(message.contains("Permission denied"), "{message}");
    assert!(message.contains("chmod g+rw"), "{message}");
    assert!(message.contains("AGENTPACK_HOME"), "{message}");
    assert!(!message.contains("manual deletion"), "{message}");
    message
}

/// Not a test on its own: the body of the other-user scenarios, run by the tests below through
/// `setpriv` in a fresh process.
#[test]
#[ignore = "run by the other tests of this file as another uid"]
fn run_as_other_user() {
    let scenario = std::env::var(SCENARIO_ENV).expect("run by the other tests of this file");
    let cache = PathBuf::from(std::env::var(CACHE_ENV).unwrap());
    match scenario.as_str() {
        "publish" => scenario_publish_as_non_root(&cache),
        "shared-a" => scenario_shared_member(&cache, "a"),
        "shared-b" => scenario_shared_member(&cache, "b"),
        "locked-out" => {
            let message = scenario_locked_out(&cache);
            println!("locked out as expected: {message}");
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn a_user_other_than_root_publishes_repairs_and_verifies() {
    if let Some(reason) = cannot_switch_users() {
        skip(reason);
        return;
    }
    let dir = open_test_dir();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(USER_A), Some(USER_A)).unwrap();
    run_as(USER_A, USER_A, "publish", &home.join("cache"));
    let store_dir = home.join("cache/store/v1");
    let names: Vec<String> = std::fs::read_dir(&store_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.len() > 33 && n.as_bytes()[32] == b'-')
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    for name in names {
        let path = store_dir.join(&name);
        assert_eq!(std::fs::metadata(&path).unwrap().uid(), USER_A);
        assert_sealed(&path);
    }
}

#[test]
fn two_members_of_a_group_share_a_store() {
    if let Some(reason) = cannot_switch_users() {
        skip(reason);
        return;
    }
    let dir = open_test_dir();
    // What docs/src/store.md tells an administrator to do.
    let cache = dir.path().join("shared/cache");
    std::fs::create_dir_all(cache.join("store")).unwrap();
    for path in [
        dir.path().join("shared"),
        cache.clone(),
        cache.join("store"),
    ] {
        std::os::unix::fs::chown(&path, None, Some(TEAM)).unwrap();
        chmod(&path, 0o2775);
    }
    // The administrator opens it first, so it owns the shared directories.
    drop(open_shared(&cache));
    run_as(USER_A, TEAM, "shared-a", &cache);
    run_as(USER_B, TEAM, "shared-b", &cache);
    run_as(USER_A, TEAM, "shared-a", &cache);

    let v1 = cache.join("store/v1");
    assert_eq!(mode(&v1.join("lock")) & 0o060, 0o060, "v1/lock");
    // Each member keeps a private index of their own (another member must not write what they read).
    for uid in [USER_A, USER_B] {
        let own = v1.join("index").join(format!("u{uid}"));
        assert_eq!(mode(&own), 0o700, "{}", own.display());
        assert_eq!(std::fs::metadata(&own).unwrap().uid(), uid);
        for file in ["data.mdb", "lock.mdb"] {
            assert!(own.join(file).is_file(), "{}", own.display());
        }
    }
    assert_eq!(mode(&v1.join("index")), 0o3775);
    let owners: std::collections::BTreeSet<u32> = std::fs::read_dir(&v1)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with("-a"))
        .chain(
            std::fs::read_dir(&v1)
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with("-b")),
        )
        .map(|e| e.metadata().unwrap().uid())
        .collect();
    assert_eq!(owners, [USER_B, USER_A].into_iter().collect());
}

#[test]
fn a_user_outside_the_group_is_told_how_to_share_the_lock() {
    if let Some(reason) = cannot_switch_users() {
        skip(reason);
        return;
    }
    let dir = open_test_dir();
    let cache = dir.path().join("cache");
    // Created by root in a store that is not group-shared.
    let store = open_shared(&cache);
    let src = dir.path().join("src");
    package_tree(&src, "root");
    store.publish_tree(&src, "demo", None).unwrap();
    drop(store);
    assert_eq!(mode(&cache.join("store/v1/lock")) & 0o020, 0);
    let out = run_as(USER_A, USER_A, "locked-out", &cache);
    assert!(out.contains("locked out as expected"), "{out}");
}

fn reflink_works_in(dir: &Path) -> bool {
    let a = dir.join("probe-a");
    std::fs::write(&a, b"probe").unwrap();
    let works = reflink_copy::reflink(&a, dir.join("probe-b")).is_ok();
    let _ = std::fs::remove_file(dir.join("probe-b"));
    std::fs::remove_file(a).unwrap();
    works
}

#[test]
fn a_link_mode_the_filesystem_cannot_do_warns_once() {
    let dir = TestDir::new();
    if reflink_works_in(dir.path()) {
        skip("the filesystem of the temp dir supports reflinks, so nothing falls back");
        return;
    }
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let store = open_store(dir.path(), LinkMode::Reflink);
    store.publish_tree(&src, "demo", None).unwrap();
    let warnings = store.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("{LINK_MODE_ENV}=reflink")),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("placed by copy"), "{warnings:?}");
    // Once per store open: later publications stay quiet.
    let name: StorePathName = format!("{}-files", "3".repeat(32)).parse().unwrap();
    let plan = [PlannedFile::new(
        "x.txt",
        Source::Bytes(b"x\n".to_vec()),
        false,
    )];
    store.publish_files(&name, &plan, &[]).unwrap();
    package_tree(&dir.path().join("src2"), "b");
    store
        .publish_tree(&dir.path().join("src2"), "demo", None)
        .unwrap();
    assert_eq!(store.take_warnings(), Vec::<String>::new());
    drop(store);

    // One command may open the store several times: the warning is not repeated in this process.
    let store = open_store(dir.path(), LinkMode::Reflink);
    package_tree(&dir.path().join("src4"), "d");
    store
        .publish_tree(&dir.path().join("src4"), "demo", None)
        .unwrap();
    assert_eq!(store.take_warnings(), Vec::<String>::new());
    drop(store);

    // Another store warns when publishing a built path (a generation); a mode that works does not warn.
    let other = TestDir::new();
    let store = open_store(other.path(), LinkMode::Reflink);
    let name: StorePathName = format!("{}-built", "4".repeat(32)).parse().unwrap();
    store
        .publish_built(&name, &[], |out, _| {
            std::fs::write(out.join("f.txt"), b"built\n")?;
            Ok(())
        })
        .unwrap();
    let warnings = store.take_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(&format!("{LINK_MODE_ENV}=reflink")));
    let third = TestDir::new();
    let store = open_store(third.path(), LinkMode::Hardlink);
    package_tree(&third.path().join("src3"), "c");
    store
        .publish_tree(&third.path().join("src3"), "demo", None)
        .unwrap();
    assert_eq!(store.take_warnings(), Vec::<String>::new());
}
