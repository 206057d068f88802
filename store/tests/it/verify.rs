//! `verify` names damaged blobs and store paths; `repair` restores them or removes what it cannot.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use agentpack_store::{
    hash_tree, verify, LinkMode, PlannedFile, Source, StorePathName, VerifyOptions,
};
use common::{open_store, package_tree, write, TestDir};

fn append(path: &std::path::Path, bytes: &[u8]) {
    // Root can write a 0444 file; anyone else first makes it writable, as an editor would.
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o200)).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_file_changed_in_place_is_reported_and_repaired_from_a_good_copy() {
    let dir = TestDir::new();
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let expected = hash_tree(&src).unwrap();
    let linked = open_store(dir.path(), LinkMode::Hardlink);
    let copied = open_store(dir.path(), LinkMode::Copy);
    let package = linked
        .publish_tree(&src, "linked", Some(&expected))
        .unwrap();
    // The same content published again as copies: a good copy on another inode.
    let copy = copied
        .publish_tree(&src, "copied", Some(&expected))
        .unwrap();
    assert!(verify(&linked, VerifyOptions::default())
        .unwrap()
        .is_clean());

    // An editor appends to a staged hard link: the store file and its blob change with it.
    let staged = dir.path().join("staged");
    linked.materialize(&package, &staged).unwrap();
    append(&staged.join("SKILL.md"), b"oops\n");
    assert_ne!(hash_tree(package.path()).unwrap(), expected);

    let report = verify(&linked, VerifyOptions::default()).unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.damaged_blobs.len(), 1, "{report:?}");
    assert!(
        report.damaged_blobs[0].problem.contains("content"),
        "{report:?}"
    );
    let damaged: Vec<&str> = report
        .damaged_paths
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        damaged,
        vec![package.name().as_str()],
        "the copy is intact: {report:?}"
    );
    assert_eq!(
        report.damaged_paths[0].problems,
        vec!["SKILL.md: content changed".to_owned()]
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["damaged_paths"][0]["name"], package.name().as_str());

    let repaired = verify(&linked, VerifyOptions { repair: true }).unwrap();
    assert!(repaired.unrepairable.is_empty(), "{repaired:?}");
    assert_eq!(repaired.repaired.len(), 2, "{repaired:?}");
    assert_eq!(hash_tree(package.path()).unwrap(), expected);
    assert_eq!(hash_tree(copy.path()).unwrap(), expected);
    assert!(verify(&linked, VerifyOptions::default())
        .unwrap()
        .is_clean());
}

#[test]
fn without_a_good_copy_the_damaged_path_is_removed_for_refetch() {
    let dir = TestDir::new();
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let package = store.publish_tree(&src, "demo", None).unwrap();
    store.set_slot("key", &package).unwrap();
    append(&package.path().join("SKILL.md"), b"changed in place\n");
    let report = verify(&store, VerifyOptions { repair: true }).unwrap();
    assert_eq!(
        report.unrepairable,
        vec![package.name().to_string()],
        "{report:?}"
    );
    assert!(!package.path().exists());
    assert_eq!(
        store.slot("key").unwrap(),
        None,
        "the slot dangles: the next sync fetches again"
    );
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    // Fetching again publishes a fresh, correct path.
    let again = store.publish_tree(&src, "demo", None).unwrap();
    assert_eq!(again.name(), package.name());
    assert_eq!(hash_tree(again.path()).unwrap(), hash_tree(&src).unwrap());
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn modes_and_structure_are_checked() {
    let dir = TestDir::new();
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let store = open_store(dir.path(), LinkMode::Copy);
    let package = store.publish_tree(&src, "demo", None).unwrap();
    // A writable file, an extra file and a missing one.
    let file = package.path().join("shared.txt");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(package.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(package.path().join("extra"), b"x").unwrap();
    std::fs::remove_file(package.path().join("empty.txt")).unwrap();
    let report = verify(&store, VerifyOptions::default()).unwrap();
    let problems = &report.damaged_paths[0].problems;
    assert!(
        problems.iter().any(|p| p.contains("shared.txt: mode 0644")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p == "extra: unexpected entry"),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p == "empty.txt: missing"),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("directory has mode 0755")),
        "{problems:?}"
    );
    // Blobs are intact (copy mode): the path is rebuilt from them.
    let repaired = verify(&store, VerifyOptions { repair: true }).unwrap();
    assert!(repaired.unrepairable.is_empty(), "{repaired:?}");
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    assert_eq!(hash_tree(package.path()).unwrap(), hash_tree(&src).unwrap());
}

#[test]
fn a_blob_with_a_wrong_mode_is_fixed() {
    let dir = TestDir::new();
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let store = open_store(dir.path(), LinkMode::Copy);
    store.publish_tree(&src, "demo", None).unwrap();
    let blob = std::fs::read_dir(store.store_dir().join("blobs"))
        .unwrap()
        .flatten()
        .flat_map(|shard| std::fs::read_dir(shard.path()).unwrap().flatten())
        .next()
        .unwrap()
        .path();
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o666)).unwrap();
    let report = verify(&store, VerifyOptions::default()).unwrap();
    assert!(
        report.damaged_blobs[0].problem.contains("mode is 0666"),
        "{report:?}"
    );
    verify(&store, VerifyOptions { repair: true }).unwrap();
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn a_fresh_download_heals_damaged_blobs_and_repair_tree_replaces_the_path() {
    let dir = TestDir::new();
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let expected = hash_tree(&src).unwrap();
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let package = store.publish_tree(&src, "demo", Some(&expected)).unwrap();
    store.set_slot("key", &package).unwrap();
    append(
        &package.path().join("SKILL.md"),
        b"edited through a hard link\n",
    );
    // The slot no longer verifies: the cli reports `content hash mismatch` and changes nothing.
    assert!(store.verified_slot("key", &expected).is_err());
    // Another package sharing the damaged blob still publishes correctly from a good download.
    let other = store
        .publish_tree(&src, "other-label", Some(&expected))
        .unwrap();
    assert_eq!(hash_tree(other.path()).unwrap(), expected);
    // `sync --repair`: the fresh, verified download replaces the damaged path in place.
    let repaired = store.repair_tree(&src, "demo", Some(&expected)).unwrap();
    assert_eq!(repaired, package);
    assert_eq!(hash_tree(package.path()).unwrap(), expected);
    assert_eq!(
        store.verified_slot("key", &expected).unwrap(),
        Some(package)
    );
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn generations_link_package_files_from_their_recorded_blobs() {
    let dir = TestDir::new();
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let store = open_store(dir.path(), LinkMode::Copy);
    let package = store.publish_tree(&src, "demo", None).unwrap();
    // The package's own copy is damaged; its blob (a separate inode in copy mode) is intact.
    append(&package.path().join("SKILL.md"), b"damaged\n");
    let name = agentpack_store::StorePathName::from_inputs(b"gen", "generation");
    let plan = vec![agentpack_store::PlannedFile::new(
        "skills/demo/SKILL.md",
        agentpack_store::Source::ExistingFile(package.path().join("SKILL.md")),
        false,
    )];
    let generation = store
        .publish_files(&name, &plan, std::slice::from_ref(&package))
        .unwrap();
    // The file comes from the manifest's blob, not from re-reading (and trusting) the damaged copy.
    assert_eq!(
        std::fs::read(generation.path().join("skills/demo/SKILL.md")).unwrap(),
        b"# skill a\n"
    );
}

#[test]
fn a_deleted_package_store_path_is_found_and_its_slot_removed_by_repair() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let src = dir.path().join("src");
    write(&src, "SKILL.md", b"# skill\n");
    let package = store.publish_tree(&src, "demo", None).unwrap();
    store.set_slot("key", &package).unwrap();
    let name = StorePathName::from_inputs(b"generation", "generation-default");
    let plan = [PlannedFile::new(
        "SKILL.md",
        Source::ExistingFile(package.path().join("SKILL.md")),
        false,
    )];
    store
        .publish_files(&name, &plan, std::slice::from_ref(&package))
        .unwrap();
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    // Deleted by hand.
    common::unseal(package.path());
    std::fs::remove_dir_all(package.path()).unwrap();
    let report = verify(&store, VerifyOptions::default()).unwrap();
    assert!(!report.is_clean(), "{report:?}");
    let missing = package.name().to_string();
    assert!(
        report
            .missing_paths
            .iter()
            .any(|m| m == &format!("slot key: {missing}")),
        "{report:?}"
    );
    let repaired = verify(&store, VerifyOptions { repair: true }).unwrap();
    assert!(
        repaired.repaired.iter().any(|r| r.contains("slot key")),
        "{repaired:?}"
    );
    assert!(store.slot("key").unwrap().is_none());
}
