//! Publishing, slots, input-addressed builds, temp dirs and the index.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agentpack_store::{
    hash_tree, LinkMode, PackageTree, PathKind, PlannedFile, SlotState, Source, Store, StoreError,
    StoreOptions, StorePathName, TreeHash,
};
use common::{open_store, package_tree, write, TestDir};

#[test]
fn publish_tree_refuses_a_mismatch_and_publishes_nothing() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let wrong: TreeHash = format!("sha256-tree-v1:{}", "0".repeat(64))
        .parse()
        .unwrap();
    match store.publish_tree(&src, "demo", Some(&wrong)) {
        Err(StoreError::ContentHashMismatch {
            expected,
            actual,
            path,
        }) => {
            assert_eq!(expected, wrong);
            assert_eq!(actual, hash_tree(&src).unwrap());
            assert_eq!(path, src);
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    let published: Vec<_> = std::fs::read_dir(store.store_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .unwrap()
                .parse::<StorePathName>()
                .is_ok()
        })
        .collect();
    assert!(published.is_empty(), "nothing published after a mismatch");
    assert!(std::fs::read_dir(store.store_dir().join("meta"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn publish_trees_publishes_a_batch_and_keeps_a_mismatch_out_of_it() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    package_tree(&a, "a");
    package_tree(&b, "b");
    package_tree(&c, "c");
    let (hash_a, hash_b) = (hash_tree(&a).unwrap(), hash_tree(&b).unwrap());
    let hash_c = hash_tree(&c).unwrap();
    let already = store.publish_tree(&b, "b", None).unwrap();
    let results = store
        .publish_trees(&[
            PackageTree::new(&a, "a", Some(&hash_a)),
            // Expects b's hash: refused, and the rest of the batch is published all the same.
            PackageTree::new(&c, "c", Some(&hash_b)),
            PackageTree::new(&b, "b", Some(&hash_b)),
            PackageTree::new(&a, "a again", None),
        ])
        .unwrap();
    assert_eq!(results.len(), 4);
    let first = results[0].as_ref().unwrap();
    assert_eq!(first.name().hash_part(), &hash_a.hex()[..32]);
    assert_eq!(hash_tree(first.path()).unwrap(), hash_a);
    assert_eq!(store.meta(first).unwrap().tree_hash, Some(hash_a));
    assert!(
        matches!(&results[1], Err(StoreError::ContentHashMismatch { path, .. }) if *path == c),
        "{:?}",
        results[1]
    );
    // Already in the store: the same path.
    assert_eq!(results[2].as_ref().unwrap(), &already);
    // The same content twice in one batch: one store path under each label.
    let again = results[3].as_ref().unwrap();
    assert_eq!(again.name().hash_part(), first.name().hash_part());
    assert_eq!(hash_tree(again.path()).unwrap(), hash_a);
    // Nothing of the batch is left behind: no hidden tree in the store, no build directory.
    for entry in std::fs::read_dir(store.store_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(".pub-"), "{name}");
    }
    let leftovers: Vec<String> = std::fs::read_dir(store.store_dir().join(".tmp"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("pkg-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Sources are left as they were.
    assert_eq!(hash_tree(&c).unwrap(), hash_c);
    assert_eq!(hash_tree(&a).unwrap(), hash_a);
}

#[test]
fn publish_tree_is_content_addressed_and_idempotent() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let hash = hash_tree(&src).unwrap();
    let first = store.publish_tree(&src, "demo pkg", Some(&hash)).unwrap();
    let second = store.publish_tree(&src, "demo pkg", None).unwrap();
    assert_eq!(first, second);
    assert_eq!(first.name().hash_part(), &hash.hex()[..32]);
    assert_eq!(first.name().label(), "demo-pkg");
    let meta = store.meta(&first).unwrap();
    assert_eq!(meta.kind, PathKind::Package);
    assert_eq!(meta.tree_hash, Some(hash));
    // The store root is tagged and ignored.
    assert!(store.root().join("CACHEDIR.TAG").is_file());
    assert_eq!(
        std::fs::read_to_string(store.root().join(".gitignore")).unwrap(),
        "*\n"
    );
    // Store path files cannot be written by their owner's mode bits.
    let mode = std::fs::metadata(first.path().join("SKILL.md"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o222, 0);
}

#[test]
fn slots_link_into_the_store_and_verify_against_the_lock() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let src = dir.path().join("src");
    package_tree(&src, "a");
    let hash = hash_tree(&src).unwrap();
    let key = "e024077a".repeat(8);
    assert_eq!(store.slot(&key).unwrap(), None);
    let path = store.publish_tree(&src, "demo", Some(&hash)).unwrap();
    store.set_slot(&key, &path).unwrap();
    // The documented slot path reads as the package directory.
    let slot = store.cache_dir().join(&key);
    assert_eq!(
        std::fs::read_link(&slot).unwrap(),
        std::path::Path::new("store/v1").join(path.name().as_str())
    );
    assert_eq!(hash_tree(&slot).unwrap(), hash);
    assert_eq!(store.slot(&key).unwrap(), Some(path.clone()));
    assert_eq!(
        store.verified_slot(&key, &hash).unwrap(),
        Some(path.clone())
    );
    // A lock that expects something else: typed error naming the slot; nothing changed.
    let other: TreeHash = format!("sha256-tree-v1:{}", "1".repeat(64))
        .parse()
        .unwrap();
    match store.verified_slot(&key, &other) {
        Err(StoreError::ContentHashMismatch {
            expected,
            actual,
            path: at,
        }) => {
            assert_eq!(expected, other);
            assert_eq!(actual, hash);
            assert_eq!(at, slot);
            let message = StoreError::ContentHashMismatch {
                expected,
                actual,
                path: at,
            }
            .to_string();
            assert!(message.starts_with("content hash mismatch"), "{message}");
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    assert_eq!(
        store.slot(&key).unwrap(),
        Some(path.clone()),
        "the slot is left as found"
    );
    // Switching a slot is atomic.
    let src2 = dir.path().join("src2");
    package_tree(&src2, "b");
    let path2 = store.publish_tree(&src2, "demo", None).unwrap();
    store.set_slot(&key, &path2).unwrap();
    assert_eq!(
        store.slot_state(&key).unwrap(),
        SlotState::Linked(path2.clone())
    );
    // Bad keys are refused.
    for bad in ["", ".hidden", "a/b", "store"] {
        assert!(
            matches!(
                store.set_slot(bad, &path2),
                Err(StoreError::InvalidCacheKey { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn a_batch_of_slots_links_each_and_keeps_each_entrys_error() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let (src_a, src_b) = (dir.path().join("a"), dir.path().join("b"));
    package_tree(&src_a, "a");
    package_tree(&src_b, "b");
    let a = store.publish_tree(&src_a, "a", None).unwrap();
    let b = store.publish_tree(&src_b, "b", None).unwrap();
    let (key_a, key_b) = ("1a".repeat(32), "2b".repeat(32));
    let results = store
        .set_slots(&[(&key_a, &a), ("a/b", &b), (&key_b, &b)])
        .unwrap();
    assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
    assert!(
        matches!(results[1], Err(StoreError::InvalidCacheKey { .. })),
        "{results:?}"
    );
    assert_eq!(store.slot(&key_a).unwrap(), Some(a.clone()));
    assert_eq!(store.slot(&key_b).unwrap(), Some(b.clone()));
    // Again, and switched: each slot follows its own entry.
    let results = store.set_slots(&[(&key_a, &b), (&key_b, &b)]).unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(store.slot(&key_a).unwrap(), Some(b.clone()));
    assert_eq!(store.slot(&key_b).unwrap(), Some(b));
}

#[test]
fn a_legacy_slot_directory_is_imported_when_it_verifies() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let key = "ab".repeat(32);
    let legacy = store.cache_dir().join(&key);
    package_tree(&legacy, "old");
    let hash = hash_tree(&legacy).unwrap();
    assert!(matches!(
        store.slot_state(&key).unwrap(),
        SlotState::LegacyDir(_)
    ));
    let wrong: TreeHash = format!("sha256-tree-v1:{}", "2".repeat(64))
        .parse()
        .unwrap();
    assert!(matches!(
        store.verified_slot(&key, &wrong),
        Err(StoreError::ContentHashMismatch { .. })
    ));
    assert!(
        legacy.is_dir() && !legacy.is_symlink(),
        "left as found on mismatch"
    );
    let path = store.verified_slot(&key, &hash).unwrap().unwrap();
    assert!(legacy.is_symlink());
    assert_eq!(hash_tree(&legacy).unwrap(), hash);
    assert_eq!(store.slot(&key).unwrap(), Some(path));
}

#[test]
fn publish_built_knows_its_final_path_and_deduplicates() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let name = StorePathName::from_inputs(b"inputs v1", "generation-default");
    let mut calls = 0;
    let built = store
        .publish_built(&name, &[], |out, final_path| {
            calls += 1;
            std::fs::write(out.join("self.txt"), final_path.to_str().unwrap())?;
            std::fs::create_dir(out.join("hooks"))?;
            std::fs::write(out.join("hooks/run.sh"), b"#!/bin/sh\n")?;
            std::fs::set_permissions(
                out.join("hooks/run.sh"),
                std::fs::Permissions::from_mode(0o755),
            )?;
            std::fs::write(out.join("dup-a"), b"same")?;
            std::fs::write(out.join("dup-b"), b"same")?;
            Ok(())
        })
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(built.path().join("self.txt")).unwrap(),
        built.path().to_str().unwrap()
    );
    assert_eq!(
        std::fs::metadata(built.path().join("hooks/run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o555
    );
    use std::os::unix::fs::MetadataExt;
    let a = std::fs::metadata(built.path().join("dup-a")).unwrap();
    let b = std::fs::metadata(built.path().join("dup-b")).unwrap();
    assert_eq!(a.ino(), b.ino(), "identical files share one inode");
    // Built again: found, builder not called.
    let again = store
        .publish_built(&name, &[], |_, _| panic!("must not rebuild"))
        .unwrap();
    assert_eq!(again, built);
    assert_eq!(calls, 1);
    // A failing builder publishes nothing.
    let failing = StorePathName::from_inputs(b"broken", "generation");
    let err = store
        .publish_built(&failing, &[], |_, _| Err("renderer failed".into()))
        .unwrap_err();
    // The builder's error is the cause (printed once, on its own line), not part of the message.
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(cause.as_deref(), Some("renderer failed"), "{err}");
    assert!(store.get(&failing).is_none());
}

#[test]
fn a_staged_built_path_is_named_only_when_placed_and_a_dropped_one_leaves_nothing() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let hidden = |store: &Store| -> Vec<String> {
        std::fs::read_dir(store.store_dir())
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(".pub-"))
            .collect()
    };
    let name = StorePathName::from_inputs(b"snapshot acme/big", "snapshot-acme-big");
    let staged = store
        .stage_built(&name, &[], |out, _| {
            std::fs::write(out.join("tree.tar.gz"), b"archive bytes")?;
            Ok(())
        })
        .unwrap();
    assert_eq!(staged.name(), &name);
    // Sealed under a hidden name, not under its own, while a package batch is published.
    assert!(store.get(&name).is_none());
    assert_eq!(hidden(&store).len(), 1);
    let src = dir.path().join("pkg");
    package_tree(&src, "p");
    let expected = hash_tree(&src).unwrap();
    let batch = store
        .publish_trees(&[PackageTree::new(&src, "p", Some(&expected))])
        .unwrap();
    assert!(batch[0].is_ok());
    let placed = store.place_built(staged).unwrap();
    assert_eq!(store.get(&name).as_ref(), Some(&placed));
    assert_eq!(
        std::fs::read(placed.path().join("tree.tar.gz")).unwrap(),
        b"archive bytes"
    );
    assert_eq!(store.meta(&placed).unwrap().kind, PathKind::Built);
    assert!(hidden(&store).is_empty());
    // Staged again: already published, the builder is not called and placing returns it.
    let again = store
        .stage_built(&name, &[], |_, _| panic!("must not rebuild"))
        .unwrap();
    assert_eq!(store.place_built(again).unwrap(), placed);

    // Dropped unplaced: no store path, no hidden tree, no build directory.
    let other = StorePathName::from_inputs(b"snapshot acme/other", "snapshot-acme-other");
    let dropped = store
        .stage_built(&other, &[], |out, _| {
            std::fs::write(out.join("tree.tar.gz"), b"other")?;
            Ok(())
        })
        .unwrap();
    drop(dropped);
    assert!(store.get(&other).is_none());
    assert!(hidden(&store).is_empty());
    let builds: Vec<String> = std::fs::read_dir(store.store_dir().join(".tmp"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("built-"))
        .collect();
    assert!(builds.is_empty(), "{builds:?}");
    assert!(
        agentpack_store::verify(&store, agentpack_store::VerifyOptions::default())
            .unwrap()
            .is_clean()
    );
}

#[test]
fn publish_files_validates_the_plan() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let name = StorePathName::from_inputs(b"x", "gen");
    for bad in ["../escape", "/abs", "a//b", "a/./b", "", "dup"] {
        let mut plan = vec![PlannedFile::new(bad, Source::Bytes(b"x".to_vec()), false)];
        if bad == "dup" {
            plan.push(PlannedFile::new("dup", Source::Bytes(b"y".to_vec()), false));
        }
        assert!(
            matches!(
                store.publish_files(&name, &plan, &[]),
                Err(StoreError::InvalidPath { .. })
            ),
            "{bad:?}"
        );
    }
    let clash = vec![
        PlannedFile::new("a", Source::Bytes(b"x".to_vec()), false),
        PlannedFile::new("a/b", Source::Bytes(b"y".to_vec()), false),
    ];
    assert!(matches!(
        store.publish_files(&name, &clash, &[]),
        Err(StoreError::InvalidPath { .. })
    ));
    let missing = vec![PlannedFile::new(
        "a",
        Source::Blob("0".repeat(64).parse().unwrap()),
        false,
    )];
    assert!(matches!(
        store.publish_files(&name, &missing, &[]),
        Err(StoreError::MissingBlob { .. })
    ));
    assert!(store.get(&name).is_none());
}

#[test]
fn publish_files_makes_the_links_of_one_target_one_inode() {
    use std::os::unix::fs::MetadataExt;
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let name = StorePathName::from_inputs(b"links", "generation-default");
    // As a generation stages an unchanged skill directory for two agents: one absolute target.
    let target = dir.path().join("somewhere/a-package/skills/review");
    let target = target.to_str().unwrap();
    let plan = vec![
        PlannedFile::new(
            "opencode/skills/review",
            Source::Symlink(target.to_owned()),
            false,
        ),
        PlannedFile::new(
            "plugins/agentpack-bundle/skills/review",
            Source::Symlink(target.to_owned()),
            false,
        ),
        PlannedFile::new(
            "codex-home/skills/other",
            Source::Symlink("../elsewhere".to_owned()),
            false,
        ),
        PlannedFile::new("README.md", Source::Bytes(b"x".to_vec()), false),
    ];
    let published = store.publish_files(&name, &plan, &[]).unwrap();
    let link = |path: &str, target: &str| {
        let staged = published.path().join(path);
        let meta = std::fs::symlink_metadata(&staged).unwrap();
        assert!(meta.file_type().is_symlink(), "{path}");
        assert_eq!(std::fs::read_link(&staged).unwrap(), Path::new(target));
        meta
    };
    let opencode = link("opencode/skills/review", target);
    let claude = link("plugins/agentpack-bundle/skills/review", target);
    let other = link("codex-home/skills/other", "../elsewhere");
    assert_eq!(opencode.ino(), claude.ino(), "one inode for one target");
    assert_eq!(opencode.nlink(), 2);
    assert_ne!(other.ino(), opencode.ino());
    assert_eq!(other.nlink(), 1);
    // The manifest still names each link, and the path verifies.
    let report =
        agentpack_store::verify(&store, agentpack_store::VerifyOptions::default()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn temp_dir_is_on_the_store_filesystem_and_cleaned_up() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let temp = store.temp_dir().unwrap();
    write(temp.path(), "x/y.txt", b"y");
    let path = store.publish_tree(temp.path(), "from-temp", None).unwrap();
    assert!(path.path().join("x/y.txt").is_file());
    // GC leaves a live temp dir alone.
    agentpack_store::gc(&store, agentpack_store::GcOptions::default()).unwrap();
    assert!(temp.path().join("x/y.txt").is_file());
    let base = temp.path().to_path_buf();
    drop(temp);
    assert!(!base.exists());
}

#[test]
fn index_is_a_rebuildable_cache() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Auto);
    let index = store.index().unwrap().clone();
    index.put("refs", b"acme/skills@main", b"1111").unwrap();
    assert_eq!(
        index.get("refs", b"acme/skills@main").unwrap(),
        Some(b"1111".to_vec())
    );
    assert_eq!(index.get("nope", b"k").unwrap(), None);
    index.put_timed("tags", b"acme/skills", b"v1,v2").unwrap();
    let (when, value) = index.get_timed("tags", b"acme/skills").unwrap().unwrap();
    assert_eq!(value, b"v1,v2");
    assert!(when.elapsed().unwrap().as_secs() < 60);
    assert!(index.delete("refs", b"acme/skills@main").unwrap());
    assert!(!index.delete("refs", b"acme/skills@main").unwrap());
    // A second handle in the same process shares the environment.
    let again = Store::open(
        &dir.path().join("cache"),
        StoreOptions {
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        again
            .index()
            .unwrap()
            .get("tags", b"acme/skills")
            .unwrap()
            .map(|v| v.len()),
        Some(13)
    );
    // The store database rebuilds from the filesystem.
    let src = dir.path().join("src");
    write(&src, "a", b"a");
    let path = store.publish_tree(&src, "a", None).unwrap();
    store.set_slot("k1", &path).unwrap();
    assert!(matches!(
        store.rebuild_index().unwrap(),
        agentpack_store::IndexStatus::Rebuilt { .. }
    ));
    let info = store.path_info(path.name()).unwrap().unwrap();
    assert_eq!(info.kind, Some(PathKind::Package));
}

#[test]
fn no_index_when_disabled() {
    let dir = TestDir::new();
    let store = Store::open(
        &dir.path().join("cache"),
        StoreOptions {
            index: false,
            flush: true,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    assert!(store.index().is_none());
    // With flushing on, publication still works (syncfs + directory fsync).
    let src = dir.path().join("src");
    write(&src, "a", b"a");
    store.publish_tree(&src, "a", None).unwrap();
}
