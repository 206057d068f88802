//! Two machines sharing one store: pointers are host-local, so GC on one host must never judge another
//! host's indirect roots or generation history by what it cannot see. Hosts are simulated by host ids;
//! "a pointer only host A can see" is a pointer that is hidden (renamed away) while host B collects.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;

use std::path::{Path, PathBuf};

use agentpack_store::{
    gc, GcOptions, GcReport, HostSeenRecord, IndirectRootRecord, LeaseOptions, LinkMode,
    PlannedFile, Source, Store, StoreOptions, StorePath, StorePathName, HOST_ROOT_TTL,
};
use common::TestDir;

const HISTORY: &str = "project-hash/default";

fn host(dir: &Path, id: &str) -> Store {
    Store::open(
        &dir.join("cache"),
        StoreOptions {
            link_mode: Some(LinkMode::Hardlink),
            host_id: Some(id.to_owned()),
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

fn generation(store: &Store, tag: &str) -> StorePath {
    let name = StorePathName::from_inputs(tag.as_bytes(), "generation-default");
    let plan = vec![PlannedFile::new(
        "tag.txt",
        Source::Bytes(format!("{tag}\n").into_bytes()),
        false,
    )];
    store.publish_files(&name, &plan, &[]).unwrap()
}

/// What `agentpack add`/`sync` does on a host: history entry, switch the pointer, register it.
fn stage(store: &Store, staging: &Path, generation: &StorePath) -> PathBuf {
    let pointer = staging.join("modes/default");
    std::fs::create_dir_all(pointer.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&pointer);
    store.add_generation_root(HISTORY, generation).unwrap();
    std::os::unix::fs::symlink(generation.path(), &pointer).unwrap();
    store.add_indirect_root(&pointer).unwrap();
    pointer
}

fn collect(store: &Store, keep_generations: usize) -> GcReport {
    gc(
        store,
        GcOptions {
            dry_run: false,
            keep_generations,
            older_than: None,
        },
    )
    .unwrap()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn long_ago() -> u64 {
    unix_now() - HOST_ROOT_TTL.as_secs() - 3600
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    out.sort();
    out
}

/// Make every root host `id` wrote look last written (and the host last seen) before the TTL.
/// The file recording when host `id` was last seen: a user other than root keeps their own.
fn host_record(store_dir: &Path, id: &str) -> std::path::PathBuf {
    let uid = nix::unistd::geteuid().as_raw();
    let name = if uid == 0 {
        format!("{id}.json")
    } else {
        format!("{id}~u{uid}.json")
    };
    store_dir.join("gcroots/hosts").join(name)
}

fn age_host(store_dir: &Path, id: &str) {
    let seen = host_record(store_dir, id);
    let record = HostSeenRecord {
        host: id.to_owned(),
        seen: long_ago(),
    };
    std::fs::write(&seen, serde_json::to_vec(&record).unwrap()).unwrap();
    for file in files_in(&store_dir.join("gcroots/indirect")) {
        let mut record: IndirectRootRecord =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        if record.host == id {
            record.renewed = long_ago();
            std::fs::write(&file, serde_json::to_vec(&record).unwrap()).unwrap();
        }
    }
    for history in files_in(&store_dir.join("gcroots/generations")) {
        let host_dir = history.join(format!("@{id}"));
        if host_dir.is_dir() {
            for entry in files_in(&host_dir) {
                age_history_entry(&entry);
            }
        }
    }
}

/// Rename a `<nanos>-<name>` history entry so it says it was recorded before the TTL.
fn age_history_entry(entry: &Path) -> PathBuf {
    let file_name = entry.file_name().unwrap().to_str().unwrap().to_owned();
    let (_, name) = file_name.split_once('-').unwrap();
    let nanos = u128::from(long_ago()) * 1_000_000_000;
    let aged = entry.with_file_name(format!("{nanos:020}-{name}"));
    std::fs::rename(entry, &aged).unwrap();
    aged
}

#[test]
fn another_hosts_roots_stay_and_only_their_host_judges_them_by_its_pointer() {
    let dir = TestDir::new();
    let host_a = host(dir.path(), "A");
    let current = generation(&host_a, "c1");
    let staging_a = dir.path().join("hA/stage");
    let pointer = stage(&host_a, &staging_a, &current);
    drop(host_a);

    // Host B cannot see A's host-local staging directory.
    let hidden = dir.path().join("hA.not-visible-on-B");
    std::fs::rename(dir.path().join("hA"), &hidden).unwrap();
    let host_b = host(dir.path(), "B");
    let dry = gc(
        &host_b,
        GcOptions {
            dry_run: true,
            keep_generations: 0,
            older_than: None,
        },
    )
    .unwrap();
    let report = collect(&host_b, 0);
    for report in [&dry, &report] {
        assert!(report.store_paths_removed.is_empty(), "{report:?}");
        assert_eq!(report.stale_roots_removed, 0, "{report:?}");
        assert_eq!(report.generations_pruned, 0, "{report:?}");
        assert_eq!(report.roots.other_hosts, 2, "{report:?}");
        assert_eq!(report.roots.indirect, 1, "the recorded store path is kept");
        assert_eq!(report.roots.generations, 1);
    }
    assert!(current.path().is_dir());
    assert!(
        host_b.generation_history(HISTORY).unwrap().is_empty(),
        "B's rollback does not offer A's generations"
    );
    let roots = host_b.indirect_roots().unwrap();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].host.as_deref(), Some("A"));
    assert_eq!(roots[0].pointer, pointer);
    assert_eq!(roots[0].target.as_ref(), Some(current.name()));
    drop(host_b);

    // Host A sees its pointer: it prunes its own history but the pointer keeps the generation.
    std::fs::rename(&hidden, dir.path().join("hA")).unwrap();
    let host_a = host(dir.path(), "A");
    assert_eq!(host_a.generation_history(HISTORY).unwrap().len(), 1);
    let report = collect(&host_a, 0);
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    assert_eq!(report.generations_pruned, 1, "{report:?}");
    assert_eq!(report.stale_roots_removed, 0, "{report:?}");
    assert_eq!(report.roots.indirect, 1);
    assert_eq!(report.roots.other_hosts, 0);
    assert!(current.path().is_dir());

    // The project goes away on host A: A's GC judges its root stale and collects the generation.
    std::fs::remove_file(&pointer).unwrap();
    let report = collect(&host_a, 0);
    assert_eq!(report.stale_roots_removed, 1, "{report:?}");
    assert_eq!(report.store_paths_removed, vec![current.name().to_string()]);
    assert!(host_a.indirect_roots().unwrap().is_empty());
}

#[test]
fn the_same_pointer_path_on_two_hosts_is_two_roots() {
    let dir = TestDir::new();
    let staging = dir.path().join("home/.cache/agentpack/staging/p");
    let host_a = host(dir.path(), "A");
    let on_a = generation(&host_a, "built on A");
    stage(&host_a, &staging, &on_a);
    let host_b = host(dir.path(), "B");
    let on_b = generation(&host_b, "built on B");
    let pointer = stage(&host_b, &staging, &on_b);
    drop(host_b);
    assert_eq!(host_a.indirect_roots().unwrap().len(), 2);
    // Back "on host A", where the pointer at that path is A's.
    stage(&host_a, &staging, &on_a);
    drop(host_a);

    let host_a = host(dir.path(), "A");
    let report = collect(&host_a, 0);
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    assert_eq!(report.roots.indirect, 2, "{report:?}");
    // A's history is pruned by A; B's entry stays, as does what B's pointer selected.
    assert_eq!(report.generations_pruned, 1, "{report:?}");
    assert_eq!(report.roots.other_hosts, 2, "{report:?}");

    std::fs::remove_file(&pointer).unwrap();
    let report = collect(&host_a, 0);
    assert_eq!(report.stale_roots_removed, 1, "only A's root: {report:?}");
    assert_eq!(report.store_paths_removed, vec![on_a.name().to_string()]);
    assert!(on_b.path().is_dir(), "B's generation is B's to judge");
    let roots = host_a.indirect_roots().unwrap();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].host.as_deref(), Some("B"));
}

#[test]
fn roots_of_a_host_not_seen_for_the_ttl_expire_and_any_sign_of_life_renews_them() {
    let dir = TestDir::new();
    let host_a = host(dir.path(), "A");
    let current = generation(&host_a, "c1");
    let pointer = stage(&host_a, &dir.path().join("hA/stage"), &current);
    std::fs::remove_file(&pointer).unwrap(); // not visible to B
    let store_dir = host_a.store_dir().to_path_buf();
    drop(host_a);

    // A was last seen long ago but took a lease since (a launch): still alive.
    age_host(&store_dir, "A");
    let host_a = host(dir.path(), "A");
    let lease = host_a.acquire_lease(&[], LeaseOptions::default()).unwrap();
    host_a.release_lease(&lease).unwrap();
    drop(host_a);
    let host_b = host(dir.path(), "B");
    let report = collect(&host_b, 0);
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    assert_eq!(report.roots.other_hosts, 2, "{report:?}");

    // A not seen for longer than the TTL: its roots are stale and what they kept goes.
    age_host(&store_dir, "A");
    let report = collect(&host_b, 0);
    assert_eq!(report.stale_roots_removed, 2, "{report:?}");
    assert_eq!(report.generations_pruned, 0, "{report:?}");
    assert_eq!(report.store_paths_removed, vec![current.name().to_string()]);
    assert!(host_b.indirect_roots().unwrap().is_empty());
    assert!(host_b.hosts_seen().unwrap().iter().any(|h| h.host == "B"));
}

#[test]
fn roots_written_before_hosts_were_recorded_are_kept_until_they_are_old() {
    let dir = TestDir::new();
    let (hidden_gen, visible_gen, history_entry);
    let visible_pointer = dir.path().join("shared/stage/modes/visible");
    {
        let old = host(dir.path(), "writer");
        hidden_gen = generation(&old, "behind a pointer B cannot see");
        visible_gen = generation(&old, "behind a pointer B can see");
        // The old layout: a history entry directly in the history directory, links without a host.
        old.add_generation_root(HISTORY, &hidden_gen).unwrap();
        let host_dir = files_in(&old.store_dir().join("gcroots/generations"))[0].join("@writer");
        let entry = files_in(&host_dir)[0].clone();
        history_entry = host_dir.parent().unwrap().join(entry.file_name().unwrap());
        std::fs::remove_file(&entry).unwrap();
        std::fs::remove_dir(&host_dir).unwrap();
        std::os::unix::fs::symlink(
            Path::new("../../..").join(hidden_gen.name().as_str()),
            &history_entry,
        )
        .unwrap();
        let indirect = old.store_dir().join("gcroots/indirect");
        std::fs::remove_file(host_record(old.store_dir(), "writer")).unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("elsewhere/stage/modes/default"),
            indirect.join("a".repeat(32)),
        )
        .unwrap();
        std::fs::create_dir_all(visible_pointer.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(visible_gen.path(), &visible_pointer).unwrap();
        std::os::unix::fs::symlink(&visible_pointer, indirect.join("b".repeat(32))).unwrap();
    }

    let host_b = host(dir.path(), "B");
    assert_eq!(host_b.generation_history(HISTORY).unwrap().len(), 1);
    assert!(host_b
        .indirect_roots()
        .unwrap()
        .iter()
        .all(|root| root.host.is_none()));
    let report = collect(&host_b, 0);
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
    assert_eq!(report.stale_roots_removed, 0, "{report:?}");
    assert_eq!(report.generations_pruned, 0, "{report:?}");
    assert_eq!(report.roots.other_hosts, 3, "{report:?}");

    // Older than the TTL: the entry and the root whose pointer is not visible here go; the root whose
    // pointer is visible is still followed.
    age_history_entry(&history_entry);
    let old_link = host_b
        .store_dir()
        .join("gcroots/indirect")
        .join("a".repeat(32));
    let then = nix::sys::time::TimeSpec::new(i64::try_from(long_ago()).unwrap(), 0);
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &old_link,
        &then,
        &then,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
    let visible_link = host_b
        .store_dir()
        .join("gcroots/indirect")
        .join("b".repeat(32));
    nix::sys::stat::utimensat(
        nix::fcntl::AT_FDCWD,
        &visible_link,
        &then,
        &then,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
    let report = collect(&host_b, 0);
    assert_eq!(report.stale_roots_removed, 2, "{report:?}");
    assert_eq!(
        report.store_paths_removed,
        vec![hidden_gen.name().to_string()]
    );
    assert!(visible_gen.path().is_dir());
    assert!(visible_link.symlink_metadata().is_ok() && old_link.symlink_metadata().is_err());
    assert!(host_b.generation_history(HISTORY).unwrap().is_empty());
}
