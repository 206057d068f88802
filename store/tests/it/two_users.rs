//! The store as two real unprivileged users (`apk-test-a` and `apk-test-b` in group `apk-test`, made by
//! `agentpack_test_support::users` when the tests run as root): GC without privileges (defect 1 of
//! issue 12), a shared store no member can tamper with (defect 2), one user's GC never unregistering or
//! collecting what another user roots (defect 3), and shared directories every member can write
//! (defect 7, `cache/.rebuildable/`).
//!
//! Each scenario runs in this test binary again as that user (`setpriv`), with `--ignored --exact
//! two_users::run_scenario`. Without root (so without the users) the tests are skipped with a printed reason,
//! and fail under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // tests may unwrap and say what they measured

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use agentpack_store::{
    gc, hash_tree, BlobId, GcOptions, LinkMode, PlannedFile, Source, Store, StoreError,
    StoreOptions, StorePathName,
};
use agentpack_test_support::users::{
    du_bytes, require_test_users, set_mode, SharedTempDir, TestUser, TestUsers,
};
use common::write;

const SCENARIO_ENV: &str = "AGENTPACK_TEST_SCENARIO";
const WORK_ENV: &str = "AGENTPACK_TEST_WORK";
const OTHER_UID_ENV: &str = "AGENTPACK_TEST_OTHER_UID";

/// Run `scenario` as `user` with `work` as its working directory; panics with its output on failure.
fn run_as(user: &TestUser, scenario: &str, work: &Path, other: &TestUser) -> String {
    let exe = std::env::current_exe().unwrap();
    let out = user
        .command(exe)
        .args([
            "--ignored",
            "--exact",
            "two_users::run_scenario",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO_ENV, scenario)
        .env(WORK_ENV, work)
        .env(OTHER_UID_ENV, other.uid.to_string())
        .env("HOME", work)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "scenario {scenario} as {} failed:\n{text}",
        user.name
    );
    assert!(
        text.contains("1 passed"),
        "scenario {scenario} did not run:\n{text}"
    );
    text
}

fn open(cache: &Path) -> Store {
    Store::open(
        cache,
        StoreOptions {
            link_mode: Some(LinkMode::Auto),
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// A shared `AGENTPACK_HOME` as docs/src/shared-store.md tells an administrator to make it.
fn shared_home(dir: &Path, users: &TestUsers) -> PathBuf {
    let home = dir.join("shared");
    let store = home.join("cache/store");
    std::fs::create_dir_all(&store).unwrap();
    for path in [home.clone(), home.join("cache"), store] {
        std::os::unix::fs::chown(&path, None, Some(users.gid)).unwrap();
        set_mode(&path, 0o3775);
    }
    // The administrator opens it once, so it owns every shared directory.
    drop(open(&home.join("cache")));
    home
}

/// A private directory of `user` (0700) under `dir`, e.g. their staging root or their own store.
fn private_dir(dir: &Path, name: &str, user: &TestUser) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir(&path).unwrap();
    std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid)).unwrap();
    set_mode(&path, 0o700);
    path
}

fn is_denied(result: std::io::Result<()>) -> bool {
    matches!(result, Err(err) if matches!(err.raw_os_error(), Some(libc::EPERM | libc::EACCES)))
}

fn generation(store: &Store, tag: &str, plan: &[PlannedFile]) -> agentpack_store::StorePath {
    let name = StorePathName::from_inputs(tag.as_bytes(), "generation-default");
    store.publish_files(&name, plan, &[]).unwrap()
}

fn bytes_file(path: &str, bytes: &[u8]) -> PlannedFile {
    PlannedFile::new(path, Source::Bytes(bytes.to_vec()), false)
}

// ----- scenarios (run as a test user) -----

/// Defect 1: GC in a user's own store removes the unreachable store paths and blobs, and the bytes it
/// reports freed are the bytes `du` sees go.
fn scenario_gc_frees(work: &Path) {
    let cache = work.join("own/cache");
    let store = open(&cache);
    // Warm: the host record and the lock's owner line exist before measuring.
    gc(&store, GcOptions::default()).unwrap();
    let src = work.join("own/src");
    write(&src, "SKILL.md", b"# skill\n");
    write(&src, "big.bin", &vec![7u8; 512 * 1024]);
    write(&src, "deep/er/file.txt", b"deep\n");
    let package = store.publish_tree(&src, "demo", None).unwrap();
    let big: Vec<u8> = (0..600 * 1024).map(|i| (i % 251) as u8).collect();
    let plan = [
        bytes_file("claude/big.bin", &big),
        bytes_file("claude/settings.json", b"{}"),
        PlannedFile::new(
            "claude/skills/demo/SKILL.md",
            Source::ExistingFile(package.path().join("SKILL.md")),
            false,
        ),
    ];
    let generation = generation(&store, "gc-frees", &plan);
    drop(store);

    let store_dir = cache.join("store");
    let before = du_bytes(&store_dir);
    let store = open(&cache);
    let report = gc(&store, GcOptions::default()).unwrap();
    let after = du_bytes(&store_dir);
    println!("du before {before}, after {after}, reported {report:?}");
    assert!(!package.path().exists(), "the package is still there");
    assert!(!generation.path().exists(), "the generation is still there");
    assert_eq!(report.store_paths_removed.len(), 2, "{report:?}");
    assert!(report.blobs_removed >= 3, "{report:?}");
    assert!(report.not_removed.is_empty(), "{report:?}");
    assert!(report.warnings.is_empty(), "{report:?}");
    assert!(report.bytes_freed > 1024 * 1024, "{report:?}");
    let seen = before - after;
    assert!(
        seen.abs_diff(report.bytes_freed) <= 8192,
        "gc reported {} bytes freed, du saw {seen}",
        report.bytes_freed
    );
    // Nothing left moved aside.
    let hidden: Vec<_> = std::fs::read_dir(store.store_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gc-"))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
    // A second GC finds nothing.
    let again = gc(&store, GcOptions::default()).unwrap();
    assert!(again.store_paths_removed.is_empty(), "{again:?}");
    assert_eq!(again.blobs_removed, 0, "{again:?}");
}

/// A publishes a package, points a slot at it, builds a generation selected by a pointer in its
/// private staging directory, and records it in its history.
fn scenario_a_publishes(work: &Path) {
    let cache = work.join("shared/cache");
    let store = open(&cache);
    let src = work.join("a-src");
    write(&src, "SKILL.md", b"# genuine skill\n");
    let package = store.publish_tree(&src, "pkg-a", None).unwrap();
    store.set_slot("slot-a", &package).unwrap();
    // A's own index (its store database), private to A.
    agentpack_store::info(&store).unwrap();
    // A's generation also uses B's package (published earlier by B): B's GC must keep it.
    let b_package = std::fs::read_to_string(work.join("b-package")).unwrap();
    let b_package = Path::new(b_package.trim()).to_path_buf();
    let plan = [
        bytes_file("claude/settings.json", b"genuine-1"),
        PlannedFile::new(
            "claude/skills/a/SKILL.md",
            Source::ExistingFile(package.path().join("SKILL.md")),
            false,
        ),
        PlannedFile::new(
            "claude/skills/b/SKILL.md",
            Source::ExistingFile(b_package.join("SKILL.md")),
            false,
        ),
    ];
    let name = StorePathName::from_inputs(b"a-generation-1", "generation-default");
    let references = [package.clone(), store.planned(&b_package_name(&b_package))];
    let generation = store.publish_files(&name, &plan, &references).unwrap();
    let staging = work.join("a-private/staging/modes");
    std::fs::create_dir_all(&staging).unwrap();
    let pointer = staging.join("default");
    std::os::unix::fs::symlink(generation.path(), &pointer).unwrap();
    store.add_indirect_root(&pointer).unwrap();
    // History: an older generation and the current one.
    let older = generation_for(&store, "a-generation-0", b"genuine-0");
    store
        .add_generation_root("project-a/default", &older)
        .unwrap();
    store
        .add_generation_root("project-a/default", &generation)
        .unwrap();
    assert_eq!(
        std::fs::read(generation.path().join("claude/skills/b/SKILL.md")).unwrap(),
        b"# b's skill\n"
    );
}

fn b_package_name(path: &Path) -> StorePathName {
    path.file_name().unwrap().to_str().unwrap().parse().unwrap()
}

fn generation_for(store: &Store, tag: &str, bytes: &[u8]) -> agentpack_store::StorePath {
    generation(store, tag, &[bytes_file("claude/settings.json", bytes)])
}

/// B publishes a package A will use.
fn scenario_b_publishes(work: &Path) {
    let store = open(&work.join("shared/cache"));
    let src = work.join("b-src");
    write(&src, "SKILL.md", b"# b's skill\n");
    let package = store.publish_tree(&src, "pkg-b", None).unwrap();
    std::fs::write(work.join("b-package"), package.path().display().to_string()).unwrap();
}

/// Defect 2: B tries every rename, unlink and create on A's objects and on names A will need.
fn scenario_b_attacks(work: &Path, a_uid: u32) {
    let cache = work.join("shared/cache");
    let store = open(&cache);
    let v1 = store.store_dir().to_path_buf();
    let a_generation = v1.join(
        StorePathName::from_inputs_for(b"a-generation-1", "generation-default", a_uid).as_str(),
    );
    assert!(a_generation.is_dir(), "{}", a_generation.display());
    // A forged tree of B's.
    let forged = work.join("b-forged");
    write(&forged, "claude/settings.json", b"forged");
    // Rename A's generation aside, or put another tree in its place.
    assert!(is_denied(std::fs::rename(&a_generation, v1.join("aside"))));
    assert!(std::fs::rename(&forged, &a_generation).is_err());
    // A's blob of "genuine-1": replace or remove it.
    let blob_id = BlobId::of(b"genuine-1").hex();
    let blob = v1.join("blobs").join(&blob_id[..2]).join(&blob_id);
    assert!(blob.is_file());
    assert!(is_denied(std::fs::remove_file(&blob)));
    let forged_blob = v1.join("blobs").join(&blob_id[..2]).join("forged");
    std::fs::write(&forged_blob, b"forged").unwrap();
    assert!(is_denied(std::fs::rename(&forged_blob, &blob)));
    std::fs::remove_file(&forged_blob).unwrap();
    // A's metadata, slot and roots.
    let meta = v1.join("meta").join(format!(
        "{}.json",
        a_generation.file_name().unwrap().to_str().unwrap()
    ));
    assert!(is_denied(std::fs::remove_file(&meta)));
    assert!(is_denied(std::fs::remove_file(cache.join("slot-a"))));
    std::os::unix::fs::symlink("store/v1/forged", cache.join(".b-slot")).unwrap();
    assert!(is_denied(std::fs::rename(
        cache.join(".b-slot"),
        cache.join("slot-a")
    )));
    std::fs::remove_file(cache.join(".b-slot")).unwrap();
    for entry in std::fs::read_dir(v1.join("gcroots/indirect"))
        .unwrap()
        .flatten()
    {
        assert!(is_denied(std::fs::remove_file(entry.path())));
    }
    // A's index.
    let a_index = v1.join("index").join(format!("u{a_uid}"));
    assert!(a_index.is_dir());
    assert!(std::fs::read_dir(&a_index).is_err(), "B can read A's index");

    // Names A will need later: a generation, a blob, a package.
    let next = v1.join(
        StorePathName::from_inputs_for(b"a-generation-2", "generation-default", a_uid).as_str(),
    );
    write(&next, "claude/settings.json", b"forged");
    let id = BlobId::of(b"genuine-3").hex();
    let shard = v1.join("blobs").join(&id[..2]);
    if !shard.exists() {
        std::fs::create_dir(&shard).unwrap();
        set_mode(&shard, 0o3775);
    }
    std::fs::write(shard.join(&id), b"forged-3").unwrap();
    set_mode(&shard.join(&id), 0o444);
    let future = work.join("a-src-2");
    let expected = hash_tree(&future).unwrap();
    let package = v1.join(StorePathName::from_tree_hash(&expected, "pkg-a2").as_str());
    write(&package, "SKILL.md", b"# forged skill\n");
    set_mode(&package, 0o555);
    // A slot A will read, pointing at B's forged package.
    std::os::unix::fs::symlink(
        Path::new("store/v1").join(package.file_name().unwrap()),
        cache.join("slot-a2"),
    )
    .unwrap();
}

/// A after B's attempts: what A's pointer selects is A's own, unchanged; B's names are refused or
/// verified and not used.
fn scenario_a_checks(work: &Path, b_uid: u32) {
    let cache = work.join("shared/cache");
    let store = open(&cache);
    let pointer = work.join("a-private/staging/modes/default");
    let selected = store.store_path_of(&pointer).unwrap();
    assert_eq!(
        std::fs::read(selected.path().join("claude/settings.json")).unwrap(),
        b"genuine-1"
    );
    assert_eq!(
        std::fs::metadata(selected.path()).unwrap().uid(),
        nix::unistd::geteuid().as_raw()
    );
    // B's tree under A's next generation name: refused, never used.
    let name = StorePathName::from_inputs(b"a-generation-2", "generation-default");
    assert!(store.get(&name).is_none(), "another user's path is offered");
    let err = store
        .publish_files(
            &name,
            &[bytes_file("claude/settings.json", b"genuine-2")],
            &[],
        )
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::ForeignObject { owner: Some(owner), .. } if *owner == b_uid),
        "{err}"
    );
    // B's blob under the name of bytes A stages now: A's generation gets A's bytes.
    let generation = generation_for(&store, "a-generation-3", b"genuine-3");
    assert_eq!(
        std::fs::read(generation.path().join("claude/settings.json")).unwrap(),
        b"genuine-3"
    );
    let warnings = store.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("does not match its name")),
        "{warnings:?}"
    );
    let expected_a2 = hash_tree(&work.join("a-src-2")).unwrap();
    // B's tree under the name of a package A publishes: verified, refused.
    let err = store
        .publish_tree(&work.join("a-src-2"), "pkg-a2", None)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::TamperedObject { owner: Some(owner), .. } if *owner == b_uid),
        "{err}"
    );
    // B's slot under a cache key A reads: its content is checked against A's lock, refused.
    let err = store.verified_slot("slot-a2", &expected_a2).unwrap_err();
    assert!(
        matches!(err, StoreError::ContentHashMismatch { .. }),
        "{err}"
    );
    // A's slot still selects A's package.
    let expected = hash_tree(&work.join("a-src")).unwrap();
    assert!(store.verified_slot("slot-a", &expected).unwrap().is_some());
}

/// Defect 3: B's GC keeps A's roots (whose pointer B cannot see), A's history and everything they
/// reach, including B's own package A's generation uses.
fn scenario_b_collects(work: &Path) {
    let store = open(&work.join("shared/cache"));
    let options = GcOptions {
        dry_run: false,
        keep_generations: 1,
        older_than: None,
    };
    let report = gc(&store, options).unwrap();
    println!("b's gc: {report:?}");
    assert_eq!(report.stale_roots_removed, 0, "{report:?}");
    assert_eq!(report.generations_pruned, 0, "{report:?}");
    assert!(report.roots.other_users >= 3, "{report:?}");
    let b_package = std::fs::read_to_string(work.join("b-package")).unwrap();
    assert!(
        Path::new(b_package.trim()).is_dir(),
        "B's gc removed what A's generation uses"
    );
    // Both users record that this host is alive, each in a record of their own.
    let warnings = store.take_warnings();
    assert!(
        !warnings.iter().any(|w| w.contains("cannot record")),
        "{warnings:?}"
    );
    // A second run changes nothing either.
    let again = gc(&store, options).unwrap();
    assert_eq!(again.stale_roots_removed, 0, "{again:?}");
    assert!(Path::new(b_package.trim()).is_dir());
}

/// Defect 7: every member marks rebuildable slots in the shared `cache/.rebuildable/`.
fn scenario_marks_rebuildable(work: &Path, key: &str) {
    let store = open(&work.join("shared/cache"));
    store.mark_slot_rebuildable(key).unwrap();
    let dir = work.join("shared/cache/.rebuildable");
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o3070, 0o3070);
}

/// B repairs a store in which A's package was changed in place: B leaves A's objects alone and says
/// who may repair them.
fn scenario_b_repairs(work: &Path, a_uid: u32) {
    let store = open(&work.join("shared/cache"));
    let report =
        agentpack_store::verify(&store, agentpack_store::VerifyOptions { repair: true }).unwrap();
    assert!(!report.is_clean(), "{report:?}");
    assert!(
        report
            .not_repaired
            .iter()
            .any(|item| item.contains(&format!("uid {a_uid}"))),
        "{report:?}"
    );
    assert!(report.unrepairable.is_empty(), "{report:?}");
}

/// The index's "create": B makes A's index directory (`index/u<A's uid>/`, open to all) before A
/// first uses the store, with a file in it.
fn scenario_b_plants_index(work: &Path, a_uid: u32) {
    let store = open(&work.join("shared/cache"));
    let planted = store.store_dir().join("index").join(format!("u{a_uid}"));
    std::fs::create_dir_all(&planted).unwrap();
    set_mode(&planted, 0o777);
    std::fs::write(planted.join("data.mdb"), b"planted by b").unwrap();
}

/// A refuses B's index directory (B could write what A reads): no index, a warning naming it and
/// its owner, and the store still works for A.
fn scenario_a_refuses_index(work: &Path, b_uid: u32) {
    let store = open(&work.join("shared/cache"));
    assert!(store.index().is_none(), "A uses an index B made");
    let warnings = store.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("index directory") && w.contains(&b_uid.to_string())),
        "{warnings:?}"
    );
    write(&work.join("a-src"), "SKILL.md", b"# genuine skill\n");
    let package = store
        .publish_tree(&work.join("a-src"), "pkg-a", None)
        .unwrap();
    assert_eq!(
        std::fs::read(package.path().join("SKILL.md")).unwrap(),
        b"# genuine skill\n"
    );
}

/// Lines of this user's table of verified foreign trees.
fn tree_table_lines(work: &Path) -> usize {
    let uid = nix::unistd::geteuid().as_raw();
    let table = work.join(format!("shared/cache/store/v1/stamps/{uid}/trees"));
    std::fs::read_to_string(table).map_or(0, |text| text.lines().count())
}

/// B uses A's package twice, in two store handles (two commands): the first re-hashes it and
/// remembers its tree's inodes, the second finds them unchanged and does not hash it again.
fn scenario_b_verifies_once(work: &Path) {
    write(&work.join("b-copy"), "SKILL.md", b"# genuine skill\n");
    assert_eq!(tree_table_lines(work), 0);
    let store = open(&work.join("shared/cache"));
    store
        .publish_tree(&work.join("b-copy"), "pkg-a", None)
        .unwrap();
    drop(store);
    assert_eq!(tree_table_lines(work), 1, "verified and remembered");
    let store = open(&work.join("shared/cache"));
    store
        .publish_tree(&work.join("b-copy"), "pkg-a", None)
        .unwrap();
    assert_eq!(
        tree_table_lines(work),
        1,
        "the second command did not re-hash it"
    );
}

/// After A's package was changed in place, B's memory no longer matches: B hashes it again and
/// refuses it, naming its owner.
fn scenario_b_sees_the_change(work: &Path, a_uid: u32) {
    let store = open(&work.join("shared/cache"));
    let error = store
        .publish_tree(&work.join("b-copy"), "pkg-a", None)
        .unwrap_err();
    assert!(
        matches!(&error, StoreError::TamperedObject { what: "store path", owner: Some(owner), .. } if *owner == a_uid),
        "{error:?}"
    );
    assert_eq!(tree_table_lines(work), 1, "nothing new is remembered");
}

/// The body of the scenarios, run by the tests below as a test user in a fresh process.
#[test]
#[ignore = "run by the other tests of this file as a test user"]
fn run_scenario() {
    let scenario = std::env::var(SCENARIO_ENV).expect("run by the other tests of this file");
    let work = PathBuf::from(std::env::var(WORK_ENV).unwrap());
    let other: u32 = std::env::var(OTHER_UID_ENV).unwrap().parse().unwrap();
    match scenario.as_str() {
        "gc-frees" => scenario_gc_frees(&work),
        "b-publishes" => scenario_b_publishes(&work),
        "a-publishes" => scenario_a_publishes(&work),
        "b-attacks" => scenario_b_attacks(&work, other),
        "a-checks" => scenario_a_checks(&work, other),
        "b-collects" => scenario_b_collects(&work),
        "b-repairs" => scenario_b_repairs(&work, other),
        "a-publishes-only" => {
            let store = open(&work.join("shared/cache"));
            write(&work.join("a-src"), "SKILL.md", b"# genuine skill\n");
            store
                .publish_tree(&work.join("a-src"), "pkg-a", None)
                .unwrap();
        }
        "b-plants-index" => scenario_b_plants_index(&work, other),
        "a-refuses-index" => scenario_a_refuses_index(&work, other),
        "b-verifies-once" => scenario_b_verifies_once(&work),
        "b-sees-the-change" => scenario_b_sees_the_change(&work, other),
        "a-marks" => scenario_marks_rebuildable(&work, "slot-of-a"),
        "b-marks" => scenario_marks_rebuildable(&work, "slot-of-b"),
        other => panic!("unknown scenario {other}"),
    }
}

// ----- tests (run as root, switching to the test users) -----

#[test]
fn gc_as_a_regular_user_frees_the_bytes_it_reports() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    private_dir(dir.path(), "own", &users.a);
    let out = run_as(&users.a, "gc-frees", dir.path(), &users.b);
    assert!(out.contains("du before"), "{out}");
}

#[test]
fn a_member_cannot_substitute_another_members_objects_and_gc_keeps_their_roots() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let home = shared_home(dir.path(), &users);
    // A's private directory (its staging root): B cannot look inside.
    private_dir(dir.path(), "a-private", &users.a);
    write(
        &dir.path().join("a-src-2"),
        "SKILL.md",
        b"# a second skill\n",
    );
    run_as(&users.b, "b-publishes", dir.path(), &users.a);
    run_as(&users.a, "a-publishes", dir.path(), &users.b);
    let v1 = home.join("cache/store/v1");
    for sub in [
        "",
        "blobs",
        "meta",
        "gcroots/indirect",
        "gcroots/generations",
        "temproots",
        "leases",
        ".tmp",
    ] {
        let mode = std::fs::metadata(v1.join(sub)).unwrap().mode() & 0o7777;
        assert_eq!(mode & 0o3070, 0o3070, "{sub}: {mode:04o}");
    }
    run_as(&users.b, "b-collects", dir.path(), &users.a);
    run_as(&users.b, "b-attacks", dir.path(), &users.a);
    run_as(&users.a, "a-checks", dir.path(), &users.b);
    // B's GC left A's roots registered.
    let indirect: Vec<_> = std::fs::read_dir(v1.join("gcroots/indirect"))
        .unwrap()
        .flatten()
        .filter(|e| e.metadata().unwrap().uid() == users.a.uid)
        .collect();
    assert_eq!(indirect.len(), 1);
}

#[test]
fn every_member_marks_rebuildable_slots() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    shared_home(dir.path(), &users);
    run_as(&users.a, "a-marks", dir.path(), &users.b);
    run_as(&users.b, "b-marks", dir.path(), &users.a);
    let marks = dir.path().join("shared/cache/.rebuildable");
    assert!(marks.join("slot-of-a").is_file());
    assert!(marks.join("slot-of-b").is_file());
}

#[test]
fn a_member_repairing_the_store_leaves_another_members_objects_to_them() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let home = shared_home(dir.path(), &users);
    run_as(&users.a, "a-publishes-only", dir.path(), &users.b);
    // Changed in place (root may write a read-only file): the blob and the package path are damaged.
    let v1 = home.join("cache/store/v1");
    let id = BlobId::of(b"# genuine skill\n").hex();
    let blob = v1.join("blobs").join(&id[..2]).join(&id);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&blob)
        .unwrap();
    std::io::Write::write_all(&mut file, b"injected\n").unwrap();
    drop(file);
    run_as(&users.b, "b-repairs", dir.path(), &users.a);
    assert_eq!(std::fs::metadata(&blob).unwrap().uid(), users.a.uid);
}

#[test]
fn a_member_never_uses_an_index_directory_another_member_made_for_them() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    shared_home(dir.path(), &users);
    run_as(&users.b, "b-plants-index", dir.path(), &users.a);
    run_as(&users.a, "a-refuses-index", dir.path(), &users.b);
}

/// A package another member published is verified once per user, not once per command (the
/// result is remembered in `stamps/<uid>/trees`), and a change in place since then is caught.
#[test]
fn a_foreign_package_is_verified_once_per_user_and_again_after_a_change() {
    let Some(users) = require_test_users() else {
        return;
    };
    let dir = SharedTempDir::new();
    let home = shared_home(dir.path(), &users);
    run_as(&users.a, "a-publishes-only", dir.path(), &users.b);
    run_as(&users.b, "b-verifies-once", dir.path(), &users.a);
    // A's package changed in place (root may write the read-only file; the same size, so only
    // its inode's times tell).
    let v1 = home.join("cache/store/v1");
    let id = BlobId::of(b"# genuine skill\n").hex();
    let blob = v1.join("blobs").join(&id[..2]).join(&id);
    std::fs::write(&blob, b"# forged! skill\n").unwrap();
    run_as(&users.b, "b-sees-the-change", dir.path(), &users.a);
}
