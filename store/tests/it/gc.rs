//! Garbage collection: roots of every kind, references, leases across hosts, dry runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;

use std::time::Duration;

use agentpack_store::{
    gc, info, verify, GcOptions, LeaseOptions, LeaseState, LinkMode, PlannedFile, Source, Store,
    StoreOptions, StorePath, StorePathName, VerifyOptions,
};
use common::{open_store, write, TestDir};

fn store_with_host(dir: &std::path::Path, host: &str) -> Store {
    Store::open(
        &dir.join("cache"),
        StoreOptions {
            link_mode: Some(LinkMode::Hardlink),
            host_id: Some(host.to_owned()),
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

fn generation(store: &Store, tag: &str, references: &[StorePath]) -> StorePath {
    let name = StorePathName::from_inputs(tag.as_bytes(), "generation");
    let plan = vec![
        PlannedFile::new(
            "tag.txt",
            Source::Bytes(format!("{tag}\n").into_bytes()),
            false,
        ),
        PlannedFile::new(
            "shared.txt",
            Source::Bytes(b"shared by all generations\n".to_vec()),
            false,
        ),
    ];
    store.publish_files(&name, &plan, references).unwrap()
}

fn package(store: &Store, dir: &std::path::Path, tag: &str) -> StorePath {
    let src = dir.join(format!("src-{tag}"));
    write(&src, "SKILL.md", tag.as_bytes());
    store.publish_tree(&src, tag, None).unwrap()
}

fn no_temp_roots() -> GcOptions {
    GcOptions {
        dry_run: false,
        keep_generations: 1,
        older_than: None,
    }
}

#[test]
fn roots_keep_what_they_reach_and_the_rest_goes() {
    let dir = TestDir::new();
    let (slot_pkg, referenced_pkg, loose_pkg, current, old, pointed);
    {
        // Published by a handle that then goes away, as a finished sync does.
        let store = open_store(dir.path(), LinkMode::Hardlink);
        slot_pkg = package(&store, dir.path(), "slot");
        referenced_pkg = package(&store, dir.path(), "referenced");
        loose_pkg = package(&store, dir.path(), "loose");
        store.set_slot("slot-key", &slot_pkg).unwrap();
        old = generation(&store, "old", &[]);
        current = generation(&store, "current", std::slice::from_ref(&referenced_pkg));
        store.add_generation_root("project/default", &old).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        store
            .add_generation_root("project/default", &current)
            .unwrap();
        pointed = generation(&store, "pointed", &[]);
    }
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let pointer = dir.path().join("project/modes/default");
    std::fs::create_dir_all(pointer.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(pointed.path(), &pointer).unwrap();
    store.add_indirect_root(&pointer).unwrap();

    let dry = gc(
        &store,
        GcOptions {
            dry_run: true,
            ..no_temp_roots()
        },
    )
    .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.store_paths_removed.len(), 2, "{dry:?}");
    assert!(
        old.path().exists() && loose_pkg.path().exists(),
        "a dry run removes nothing"
    );

    let report = gc(&store, no_temp_roots()).unwrap();
    let mut removed = report.store_paths_removed.clone();
    removed.sort();
    let mut expected = vec![old.name().to_string(), loose_pkg.name().to_string()];
    expected.sort();
    assert_eq!(removed, expected, "{report:?}");
    assert_eq!(
        dry.store_paths_removed.len(),
        report.store_paths_removed.len()
    );
    assert_eq!(report.roots.slots, 1);
    assert_eq!(report.roots.indirect, 1);
    assert_eq!(report.roots.generations, 1);
    assert_eq!(report.generations_pruned, 1);
    assert!(report.blobs_removed >= 2, "{report:?}");
    assert!(report.bytes_freed > 0);
    for kept in [&slot_pkg, &referenced_pkg, &current, &pointed] {
        assert!(kept.path().is_dir(), "{kept} kept");
    }
    assert!(!old.path().exists() && !loose_pkg.path().exists());
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    serde_json::to_string(&report).unwrap();

    // The project goes away: its pointer's root is stale and what it reached is collected.
    std::fs::remove_file(&pointer).unwrap();
    let report = gc(&store, no_temp_roots()).unwrap();
    assert_eq!(report.store_paths_removed, vec![pointed.name().to_string()]);
    assert!(report.stale_roots_removed >= 1);
    let summary = info(&store).unwrap();
    assert_eq!(summary.store_paths, 3);
    assert_eq!(summary.slots, 1);
}

#[test]
fn temp_roots_protect_paths_while_their_handle_lives() {
    let dir = TestDir::new();
    let builder = open_store(dir.path(), LinkMode::Hardlink);
    let in_flight = package(&builder, dir.path(), "in-flight");
    let collector = open_store(dir.path(), LinkMode::Hardlink);
    let report = gc(&collector, no_temp_roots()).unwrap();
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    assert_eq!(report.roots.temp, 1);
    drop(builder);
    let report = gc(&collector, no_temp_roots()).unwrap();
    assert_eq!(
        report.store_paths_removed,
        vec![in_flight.name().to_string()]
    );
}

#[test]
fn generation_history_keeps_the_newest_and_the_young() {
    let dir = TestDir::new();
    let names: Vec<StorePath>;
    {
        let store = open_store(dir.path(), LinkMode::Hardlink);
        names = (0..5)
            .map(|i| generation(&store, &format!("g{i}"), &[]))
            .collect();
        for path in &names {
            store.add_generation_root("p/default", path).unwrap();
            store.add_generation_root("p/default", path).unwrap(); // no duplicate entry
        }
        assert_eq!(store.generation_history("p/default").unwrap().len(), 5);
        assert_eq!(
            &store.generation_history("p/default").unwrap()[0].name,
            names[4].name()
        );
    }
    let store = open_store(dir.path(), LinkMode::Hardlink);
    // Everything is younger than an hour: older_than keeps them all.
    let report = gc(
        &store,
        GcOptions {
            dry_run: false,
            keep_generations: 2,
            older_than: Some(Duration::from_secs(3600)),
        },
    )
    .unwrap();
    assert!(report.store_paths_removed.is_empty());
    let report = gc(
        &store,
        GcOptions {
            dry_run: false,
            keep_generations: 2,
            older_than: None,
        },
    )
    .unwrap();
    assert_eq!(report.store_paths_removed.len(), 3);
    assert_eq!(report.generations_pruned, 3);
    let history = store.generation_history("p/default").unwrap();
    assert_eq!(
        history.iter().map(|g| g.name.clone()).collect::<Vec<_>>(),
        vec![names[4].name().clone(), names[3].name().clone()]
    );
}

#[test]
fn leases_live_by_process_here_and_by_ttl_elsewhere() {
    let dir = TestDir::new();
    let (mine, dead, remote, expired);
    {
        let host_a = store_with_host(dir.path(), "host-a");
        let host_b = store_with_host(dir.path(), "host-b");
        mine = package(&host_a, dir.path(), "mine");
        dead = package(&host_a, dir.path(), "dead");
        remote = package(&host_b, dir.path(), "remote");
        expired = package(&host_b, dir.path(), "expired");
        // A launch of this process on host-a.
        host_a
            .acquire_lease(std::slice::from_ref(&mine), LeaseOptions::default())
            .unwrap();
        // A launch whose process has exited.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let lease = host_a
            .acquire_lease(
                std::slice::from_ref(&dead),
                LeaseOptions {
                    pid: Some(pid),
                    ..LeaseOptions::default()
                },
            )
            .unwrap();
        assert_eq!(host_a.lease_state(&lease.record), LeaseState::Stale);
        // Launches on host-b: we cannot see its processes, only the TTL.
        host_b
            .acquire_lease(std::slice::from_ref(&remote), LeaseOptions::default())
            .unwrap();
        let mut old = host_b
            .acquire_lease(
                std::slice::from_ref(&expired),
                LeaseOptions {
                    pid: Some(1),
                    ttl: Duration::from_secs(0),
                },
            )
            .unwrap();
        old.record.renewed -= 10;
        std::fs::write(&old.file, serde_json::to_vec(&old.record).unwrap()).unwrap();
    }
    let host_a = store_with_host(dir.path(), "host-a");
    let states: Vec<LeaseState> = host_a
        .leases()
        .unwrap()
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    assert_eq!(
        states.iter().filter(|s| **s == LeaseState::Live).count(),
        2,
        "{states:?}"
    );
    let report = gc(&host_a, no_temp_roots()).unwrap();
    let mut removed = report.store_paths_removed.clone();
    removed.sort();
    let mut expected = vec![dead.name().to_string(), expired.name().to_string()];
    expected.sort();
    assert_eq!(removed, expected, "{report:?}");
    assert_eq!(report.roots.leases, 2);
    assert!(mine.path().exists() && remote.path().exists());
    assert_eq!(host_a.leases().unwrap().len(), 2, "stale leases removed");
}

#[test]
fn leftovers_of_dead_builds_are_removed() {
    let dir = TestDir::new();
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let tmp = store.store_dir().join(".tmp");
    std::fs::create_dir_all(tmp.join("pkg-dead/out/sub")).unwrap();
    std::fs::write(tmp.join("pkg-dead/.lock"), b"").unwrap();
    std::fs::write(tmp.join("blob-dead"), b"partial").unwrap();
    std::fs::write(
        store
            .store_dir()
            .join("meta")
            .join(format!("{}-x.json", "a".repeat(32))),
        b"{}",
    )
    .unwrap();
    let report = gc(&store, no_temp_roots()).unwrap();
    assert_eq!(report.leftovers_removed, 3, "{report:?}");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

#[test]
fn a_reference_to_a_path_published_later_is_harmless_until_then_and_keeps_it_after() {
    let dir = TestDir::new();
    let later = StorePathName::from_inputs(b"published by a later process", "later");
    let current;
    {
        let store = open_store(dir.path(), LinkMode::Hardlink);
        let planned = store.planned(&later);
        assert!(!planned.path().exists());
        current = generation(&store, "current", std::slice::from_ref(&planned));
        store
            .add_generation_root("project/default", &current)
            .unwrap();
    }
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let report = gc(&store, no_temp_roots()).unwrap();
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
    {
        let builder = open_store(dir.path(), LinkMode::Hardlink);
        builder
            .publish_built(&later, &[], |out, _| {
                std::fs::write(out.join("file"), b"later\n")?;
                Ok(())
            })
            .unwrap();
    }
    let loose = generation(&store, "loose", &[]);
    drop(store);
    let store = open_store(dir.path(), LinkMode::Hardlink);
    let report = gc(&store, no_temp_roots()).unwrap();
    assert_eq!(report.store_paths_removed, vec![loose.name().to_string()]);
    assert!(store.get(&later).is_some(), "the reference keeps it");
    assert!(current.path().is_dir());
}

/// The stamps in the store (`stamps/<uid>/table`), by blob file name.
fn stamp_names(store: &Store) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let stamps = store.store_dir().join("stamps");
    let Ok(users) = std::fs::read_dir(stamps) else {
        return names;
    };
    for user in users {
        // One table per user (`stamps/<uid>/table`): a line per stamp, the blob's name first.
        let table = user.unwrap().path().join("table");
        for line in std::fs::read_to_string(table).unwrap_or_default().lines() {
            names.insert(line.split(' ').next().unwrap().to_owned());
        }
    }
    names
}

/// The blob file names in the store.
fn blob_names(store: &Store) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for shard in std::fs::read_dir(store.store_dir().join("blobs")).unwrap() {
        let shard = shard.unwrap();
        if !shard.file_type().unwrap().is_dir() {
            continue;
        }
        for blob in std::fs::read_dir(shard.path()).unwrap() {
            names.insert(blob.unwrap().file_name().to_string_lossy().into_owned());
        }
    }
    names
}

/// Publishes `kept<tag>` (kept by a slot) and `loose<tag>` (no root) in a handle that then goes
/// away, as a finished sync does; returns a fresh handle and the two.
fn a_kept_and_a_loose_package(dir: &std::path::Path, tag: &str) -> (Store, StorePath, StorePath) {
    let (kept, loose);
    {
        let store = open_store(dir, LinkMode::Hardlink);
        kept = package(&store, dir, &format!("kept{tag}"));
        loose = package(&store, dir, &format!("loose{tag}"));
        store.set_slot("kept-key", &kept).unwrap();
    }
    (open_store(dir, LinkMode::Hardlink), kept, loose)
}

#[test]
fn gc_removes_the_stamps_of_the_blobs_it_deletes_and_keeps_the_others() {
    let dir = TestDir::new();
    let (store, kept, loose) = a_kept_and_a_loose_package(dir.path(), "");
    let blobs_before = blob_names(&store);
    let stamps_before = stamp_names(&store);
    assert!(
        blobs_before.iter().all(|blob| stamps_before.contains(blob)),
        "publishing stamps every blob: {blobs_before:?} {stamps_before:?}"
    );

    // A dry run removes no stamp.
    gc(
        &store,
        GcOptions {
            dry_run: true,
            ..no_temp_roots()
        },
    )
    .unwrap();
    assert_eq!(stamp_names(&store), stamps_before);

    let report = gc(&store, no_temp_roots()).unwrap();
    assert_eq!(report.store_paths_removed, vec![loose.name().to_string()]);
    assert!(report.blobs_removed >= 1, "{report:?}");
    let blobs_after = blob_names(&store);
    let deleted: Vec<&String> = blobs_before.difference(&blobs_after).collect();
    assert!(!deleted.is_empty());
    let stamps_after = stamp_names(&store);
    for blob in &deleted {
        assert!(!stamps_after.contains(*blob), "the stamp of {blob} stayed");
    }
    for blob in &blobs_after {
        if stamps_before.contains(blob) {
            assert!(stamps_after.contains(blob), "the stamp of kept {blob} went");
        }
    }
    assert!(kept.path().is_dir());
    assert!(verify(&store, VerifyOptions::default()).unwrap().is_clean());
}

#[test]
fn gc_removes_the_earlier_layouts_stamp_files_of_blobs_that_are_gone() {
    let dir = TestDir::new();
    let (store, _kept, loose) = a_kept_and_a_loose_package(dir.path(), "-old-layout");
    let blobs_before = blob_names(&store);
    let user = std::fs::read_dir(store.store_dir().join("stamps"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // Per-blob stamp files of the earlier layout (`stamps/<uid>/<2hex>/<blob>`), one per blob, plus
    // one filed under a shard its name does not start with (no blob lives there).
    let old_stamp = |shard: &str, name: &str| {
        let path = user.join(shard).join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "1 2 3 4 5 6\n").unwrap();
        path
    };
    let stamps: Vec<(String, std::path::PathBuf)> = blobs_before
        .iter()
        .map(|blob| (blob.clone(), old_stamp(&blob[..2], blob)))
        .collect();
    let any = blobs_before.iter().next().unwrap();
    let misplaced_shard = if any.starts_with("00") { "01" } else { "00" };
    let misplaced = old_stamp(misplaced_shard, any);

    let report = gc(&store, no_temp_roots()).unwrap();
    assert_eq!(report.store_paths_removed, vec![loose.name().to_string()]);
    let blobs_after = blob_names(&store);
    assert!(blobs_after.len() < blobs_before.len(), "{report:?}");
    for (blob, stamp) in &stamps {
        assert_eq!(
            stamp.exists(),
            blobs_after.contains(blob),
            "the earlier-layout stamp of {blob} follows its blob"
        );
    }
    assert!(!misplaced.exists(), "a stamp outside its blob's shard went");
}
