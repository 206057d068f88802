//! Publishing a scratch tree by adoption (`PackageTree::adopting`): new blobs are the scratch
//! files' own inodes, made read-only; the tree hash read once equals `hash_tree`; anything that
//! cannot be adopted (a second name, another filesystem, the copy link mode, a large file) is
//! copied, and a mismatch still publishes nothing.

use crate::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use agentpack_store::{
    hash_tree, verify, LinkMode, PackageTree, Store, StoreError, StorePathName, TreeHash,
    VerifyOptions,
};
use common::{chmod, open_store, symlink, write, TestDir};

/// A tree with every kind of record the tree hash knows, and names whose byte order differs from
/// a per-directory order (`a-b` sorts before `a/b`, `a/b` before `a0`).
fn varied_tree(root: &Path, variant: &str) {
    write(root, "SKILL.md", format!("# skill {variant}\n").as_bytes());
    write(root, "a-b", format!("dash {variant}\n").as_bytes());
    write(root, "a/b", format!("nested {variant}\n").as_bytes());
    write(root, "a0", format!("zero {variant}\n").as_bytes());
    let script = write(
        root,
        "scripts/run.sh",
        format!("#!/bin/sh\necho {variant}\n").as_bytes(),
    );
    chmod(&script, 0o755);
    write(root, "empty.txt", b"");
    symlink(root, "link-in", "a/b");
    symlink(root, "link-out", "../../elsewhere");
    std::fs::create_dir_all(root.join("empty-dir")).unwrap();
}

/// The inode of every regular file below `root`, by relative path.
fn inodes(root: &Path) -> BTreeMap<String, u64> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                let relative = entry.path().strip_prefix(root).unwrap().to_owned();
                found.insert(relative.to_string_lossy().into_owned(), meta.ino());
            }
        }
    }
    found
}

/// No inode of `published` is one of `scratch`'s: every file was copied.
fn assert_disjoint(published: &BTreeMap<String, u64>, scratch: &BTreeMap<String, u64>) {
    for (relative, inode) in published {
        assert!(
            !scratch.values().any(|other| other == inode),
            "{relative} is a scratch file's inode"
        );
    }
}

/// A store whose link mode was already probed (a first publication), so adoption can apply.
fn probed_store(dir: &Path, mode: LinkMode) -> Store {
    let store = open_store(dir, mode);
    let warm = dir.join("warm");
    write(&warm, "warm.md", b"probes the link mode\n");
    store.publish_tree(&warm, "warm", None).unwrap();
    store
}

fn publish_adopting(store: &Store, src: &Path, expected: &TreeHash) -> agentpack_store::StorePath {
    store
        .publish_trees(&[PackageTree::adopting(src, "demo", Some(expected))])
        .unwrap()
        .pop()
        .unwrap()
        .unwrap()
}

#[test]
fn an_adopted_tree_is_its_scratch_files_made_read_only_blobs_and_verifies() {
    let dir = TestDir::new();
    let store = probed_store(dir.path(), LinkMode::Hardlink);
    let scratch = store.temp_dir().unwrap();
    let src = scratch.path().join("pkg");
    varied_tree(&src, "adopted");
    let expected = hash_tree(&src).unwrap();
    let before = inodes(&src);

    let published = publish_adopting(&store, &src, &expected);
    assert!(!src.exists(), "the scratch tree is consumed");
    assert_eq!(hash_tree(published.path()).unwrap(), expected);
    let after = inodes(published.path());
    for (relative, inode) in &before {
        let path = published.path().join(relative);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.len() == 0 {
            continue; // empty files are never blobs
        }
        // The scratch file itself, now named by the store path and its blob, nowhere else.
        assert_eq!(after[relative], *inode, "{relative} adopted");
        assert_eq!(meta.nlink(), 2, "{relative}: store path and blob");
        assert!(
            !src.join(relative).exists(),
            "{relative} left the scratch tree"
        );
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o222, 0, "{relative} is read-only ({mode:o})");
    }
    assert_eq!(
        std::fs::symlink_metadata(published.path().join("scripts/run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o555
    );
    assert_eq!(
        std::fs::symlink_metadata(published.path().join("SKILL.md"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o444
    );
    let report = verify(&store, VerifyOptions::default()).unwrap();
    assert!(report.is_clean(), "{report:?}");

    // `store verify` still catches an adopted blob changed in place.
    let victim = published.path().join("a/b");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&victim)
        .unwrap()
        .write_all(b"edited\n")
        .unwrap();
    let report = verify(&store, VerifyOptions::default()).unwrap();
    assert!(!report.damaged_blobs.is_empty(), "{report:?}");
    drop(scratch);
}

#[test]
fn the_same_content_adopted_twice_links_the_first_blobs_and_consumes_the_second_tree() {
    let dir = TestDir::new();
    let store = probed_store(dir.path(), LinkMode::Hardlink);
    let scratch = store.temp_dir().unwrap();
    let (first, second) = (scratch.path().join("one"), scratch.path().join("two"));
    varied_tree(&first, "same");
    varied_tree(&second, "same");
    let expected = hash_tree(&first).unwrap();
    let one = publish_adopting(&store, &first, &expected);
    let kept = inodes(&second);
    let two = publish_adopting(&store, &second, &expected);
    assert_eq!(one.path(), two.path());
    // The blobs existed: the second tree's files were not taken, and the tree was consumed.
    assert_disjoint(&inodes(two.path()), &kept);
    assert!(!second.exists());
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn a_file_with_a_second_name_a_large_file_or_the_copy_mode_is_copied_not_adopted() {
    let dir = TestDir::new();
    let store = probed_store(dir.path(), LinkMode::Hardlink);
    let scratch = store.temp_dir().unwrap();
    let src = scratch.path().join("pkg");
    varied_tree(&src, "linked");
    // A second name outside the tree: adopting would let it reach the blob.
    let outside = scratch.path().join("outside");
    std::fs::hard_link(src.join("SKILL.md"), &outside).unwrap();
    // Larger than what is hashed from memory: copied, and the tree hashed in the store path.
    write(&src, "big.bin", &vec![7u8; 300 * 1024]);
    let expected = hash_tree(&src).unwrap();
    let before = inodes(&src);
    let published = publish_adopting(&store, &src, &expected);
    assert_eq!(hash_tree(published.path()).unwrap(), expected);
    let after = inodes(published.path());
    assert_ne!(after["SKILL.md"], before["SKILL.md"]);
    assert_ne!(after["big.bin"], before["big.bin"]);
    let outside_mode = std::fs::metadata(&outside).unwrap().permissions().mode();
    assert_eq!(outside_mode & 0o200, 0o200, "the second name is untouched");
    // The files without a second name were adopted all the same.
    assert_eq!(after["a/b"], before["a/b"]);
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());

    // The copy link mode never adopts: store files are not the blobs' inodes.
    let copies = TestDir::new();
    let copying = probed_store(copies.path(), LinkMode::Copy);
    let scratch = copying.temp_dir().unwrap();
    let src = scratch.path().join("pkg");
    varied_tree(&src, "copied");
    let expected = hash_tree(&src).unwrap();
    let before = inodes(&src);
    let published = publish_adopting(&copying, &src, &expected);
    assert_eq!(hash_tree(published.path()).unwrap(), expected);
    assert_disjoint(&inodes(published.path()), &before);
    assert!(verify(&copying, VerifyOptions::default())
        .unwrap()
        .is_clean());
}

#[test]
fn a_scratch_tree_on_another_filesystem_is_copied() {
    let dir = TestDir::new();
    let store = probed_store(dir.path(), LinkMode::Hardlink);
    let store_dev = std::fs::metadata(store.store_dir()).unwrap().dev();
    // /dev/shm is a tmpfs wherever it exists; elsewhere the test has no second filesystem.
    let other = Path::new("/dev/shm");
    let Some(elsewhere) = other
        .is_dir()
        .then(|| tempfile::tempdir_in(other).ok())
        .flatten()
        .filter(|temp| std::fs::metadata(temp.path()).unwrap().dev() != store_dev)
    else {
        agentpack_test_support::skip(format!(
            "no second filesystem beside {} (/dev/shm is not a separate tmpfs here)",
            store.store_dir().display()
        ));
        return;
    };
    let src = elsewhere.path().join("pkg");
    varied_tree(&src, "elsewhere");
    let expected = hash_tree(&src).unwrap();
    let before = inodes(&src);
    let published = publish_adopting(&store, &src, &expected);
    assert_eq!(hash_tree(published.path()).unwrap(), expected);
    assert_disjoint(&inodes(published.path()), &before);
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn an_adopting_publication_that_does_not_match_publishes_nothing() {
    let dir = TestDir::new();
    let store = probed_store(dir.path(), LinkMode::Hardlink);
    let scratch = store.temp_dir().unwrap();
    let src = scratch.path().join("pkg");
    varied_tree(&src, "tampered");
    let actual = hash_tree(&src).unwrap();
    let wrong: TreeHash = format!("sha256-tree-v1:{}", "0".repeat(64))
        .parse()
        .unwrap();
    let results = store
        .publish_trees(&[PackageTree::adopting(&src, "demo", Some(&wrong))])
        .unwrap();
    match &results[..] {
        [Err(StoreError::ContentHashMismatch {
            expected,
            actual: found,
            ..
        })] => {
            assert_eq!(*expected, wrong);
            assert_eq!(*found, actual);
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    let published: Vec<String> = std::fs::read_dir(store.store_dir())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.parse::<StorePathName>().is_ok() && name.ends_with("-demo"))
        .collect();
    assert!(published.is_empty(), "{published:?}");
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn a_blob_changed_in_place_is_never_linked_into_an_adopted_tree() {
    let dir = TestDir::new();
    let store = probed_store(dir.path(), LinkMode::Hardlink);
    let scratch = store.temp_dir().unwrap();
    let first = scratch.path().join("one");
    varied_tree(&first, "shared");
    let expected = hash_tree(&first).unwrap();
    let one = publish_adopting(&store, &first, &expected);
    // The blob of `a/b` (the adopted inode) edited in place, its size kept.
    let victim = one.path().join("a/b");
    let good = std::fs::read(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&victim, vec![b'x'; good.len()]).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o444)).unwrap();

    // Another package holding the same file, adopted: its `a/b` is the bytes read, not the blob.
    let second = scratch.path().join("two");
    varied_tree(&second, "shared");
    write(&second, "extra.md", b"makes another package\n");
    let expected = hash_tree(&second).unwrap();
    let two = publish_adopting(&store, &second, &expected);
    assert_eq!(hash_tree(two.path()).unwrap(), expected);
    assert_eq!(std::fs::read(two.path().join("a/b")).unwrap(), good);
    // The blob is restored from the verified copy; only the first store path keeps the edit.
    let report = verify(&store, VerifyOptions::default()).unwrap();
    assert!(report.damaged_blobs.is_empty(), "{report:?}");
    assert_eq!(report.damaged_paths.len(), 1, "{report:?}");
}
