//! The store database in the index: what `gc`, `store info` and `store verify` read, rebuilt from the
//! filesystem when deleted, stale or corrupt, and never more trusted than the filesystem.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;

use std::path::Path;

use agentpack_store::{
    gc, info, verify, GcOptions, GcReport, IndexStatus, LinkMode, PlannedFile, Source, Store,
    StoreInfo, StoreOptions, StorePath, StorePathName, VerifyOptions,
};
use common::{package_tree, write, TestDir};

/// The table of store path records (an implementation detail the tests reach into to damage it).
const PATHS_TABLE: &str = "store-paths";

fn open(dir: &Path, index: bool) -> Store {
    Store::open(
        &dir.join("cache"),
        StoreOptions {
            link_mode: Some(LinkMode::Hardlink),
            flush: false,
            index,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// Two packages and a generation referencing one of them, rooted by a slot and a history; one
/// unreferenced package.
fn populate(store: &Store, dir: &Path) -> (StorePath, StorePath, StorePath) {
    let src = dir.join("src-kept");
    package_tree(&src, "kept");
    let kept = store.publish_tree(&src, "kept", None).unwrap();
    let src = dir.join("src-dropped");
    package_tree(&src, "dropped-variant");
    let dropped = store.publish_tree(&src, "dropped", None).unwrap();
    let name = StorePathName::from_inputs(b"generation one", "generation");
    let plan = vec![
        PlannedFile::new(
            "claude/skills/kept/SKILL.md",
            Source::ExistingFile(kept.path().join("SKILL.md")),
            false,
        ),
        PlannedFile::new(
            "claude/settings.json",
            Source::Bytes(b"{}\n".to_vec()),
            false,
        ),
        PlannedFile::new("link", Source::Symlink("claude".into()), false),
    ];
    let generation = store
        .publish_files(&name, &plan, std::slice::from_ref(&kept))
        .unwrap();
    store
        .add_generation_root("project/default", &generation)
        .unwrap();
    store.set_slot("slot-kept", &kept).unwrap();
    (kept, dropped, generation)
}

fn du(path: &Path) -> u64 {
    let output = std::process::Command::new("du")
        .args(["-s", "--block-size=1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(output.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// `info` without where the store is, where the index is and how it served the call.
fn comparable(info: &StoreInfo) -> StoreInfo {
    let mut info = info.clone();
    info.index = None;
    info.index_status = IndexStatus::Unavailable;
    info.location = std::path::PathBuf::new();
    // The index's own files are part of the store when it lives inside it; `other` holds the temp
    // roots of the handles, which come and go with them.
    info.allocated.total -= info.allocated.index + info.allocated.other;
    info.allocated.index = 0;
    info.allocated.other = 0;
    info
}

/// A fresh store handle in this process (the previous one dropped first: LMDB keeps one environment
/// per directory and process while a handle lives).
fn reopen(dir: &Path) -> Store {
    open(dir, true)
}

#[test]
fn the_database_is_rebuilt_after_the_index_is_deleted() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    populate(&store, dir.path());
    let first = info(&store).unwrap();
    assert!(
        matches!(first.index_status, IndexStatus::Rebuilt { .. }),
        "a new index is filled from the filesystem: {:?}",
        first.index_status
    );
    let second = info(&store).unwrap();
    assert_eq!(second.index_status, IndexStatus::Current);
    assert_eq!(comparable(&first), comparable(&second));
    let location = store.index_location().unwrap().to_path_buf();
    drop(store);

    std::fs::remove_dir_all(&location).unwrap();
    let store = reopen(dir.path());
    let after = info(&store).unwrap();
    assert!(
        matches!(after.index_status, IndexStatus::Rebuilt { .. }),
        "{:?}",
        after.index_status
    );
    assert!(location.join("data.mdb").is_file(), "the index is back");
    assert_eq!(comparable(&after), comparable(&first));
    // A deleted index is no damage: nothing to warn about.
    assert_eq!(store.take_warnings(), Vec::<String>::new());
    assert_eq!(info(&store).unwrap().index_status, IndexStatus::Current);
}

#[test]
fn stale_records_are_detected_and_made_again() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    let (kept, dropped, _) = populate(&store, dir.path());
    info(&store).unwrap();
    assert_eq!(info(&store).unwrap().index_status, IndexStatus::Current);

    // A path published since: added.
    let src = dir.path().join("src-new");
    write(&src, "SKILL.md", b"# new\n");
    store.publish_tree(&src, "new", None).unwrap();
    assert_eq!(
        info(&store).unwrap().index_status,
        IndexStatus::Updated {
            added: 1,
            refreshed: 0,
            dropped: 0
        }
    );

    // A metadata file replaced (as `record_source_executables` and repair do): that record is stale.
    let meta_path = store
        .store_dir()
        .join("meta")
        .join(format!("{}.json", dropped.name()));
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["references"] = serde_json::json!([kept.name().to_string()]);
    let temp = meta_path.with_extension("tmp");
    std::fs::write(&temp, serde_json::to_vec(&meta).unwrap()).unwrap();
    std::fs::rename(&temp, &meta_path).unwrap();
    assert_eq!(
        info(&store).unwrap().index_status,
        IndexStatus::Updated {
            added: 0,
            refreshed: 1,
            dropped: 0
        }
    );
    let path_info = store.path_info(dropped.name()).unwrap().unwrap();
    assert_eq!(path_info.references, vec![kept.name().to_string()]);

    // A path removed by hand: its record goes.
    common::unseal(dropped.path());
    std::fs::remove_dir_all(dropped.path()).unwrap();
    assert_eq!(
        info(&store).unwrap().index_status,
        IndexStatus::Updated {
            added: 0,
            refreshed: 0,
            dropped: 1
        }
    );
    assert_eq!(store.path_info(dropped.name()).unwrap(), None);
}

#[test]
fn gc_follows_the_filesystem_when_a_record_is_stale() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    let (kept, dropped, generation) = populate(&store, dir.path());
    // The database learns the generation references only `kept`.
    info(&store).unwrap();
    // Then its metadata on disk names `dropped` too (the filesystem is the truth).
    let meta_path = store
        .store_dir()
        .join("meta")
        .join(format!("{}.json", generation.name()));
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["references"] = serde_json::json!([kept.name().to_string(), dropped.name().to_string()]);
    let temp = meta_path.with_extension("tmp");
    std::fs::write(&temp, serde_json::to_vec(&meta).unwrap()).unwrap();
    std::fs::rename(&temp, &meta_path).unwrap();
    drop(store);
    let store = reopen(dir.path());
    let report = gc(
        &store,
        GcOptions {
            keep_generations: 1,
            ..GcOptions::default()
        },
    )
    .unwrap();
    assert!(
        dropped.path().is_dir(),
        "a path the metadata on disk references survives a stale record: {report:?}"
    );
    assert!(report.store_paths_removed.is_empty(), "{report:?}");
}

/// Two stores built the same way, one with an index and one without.
fn twin_stores(dir: &Path) -> (Store, Store) {
    let with = open(&dir.join("with"), true);
    let without = open(&dir.join("without"), false);
    assert!(without.index().is_none());
    for (store, base) in [(&with, dir.join("with")), (&without, dir.join("without"))] {
        populate(store, &base);
    }
    (with, without)
}

fn comparable_gc(report: &GcReport) -> GcReport {
    let mut report = report.clone();
    report.roots.temp = 0;
    report
}

#[test]
fn gc_and_info_give_the_same_results_with_and_without_the_index() {
    let dir = TestDir::new();
    let (with, without) = twin_stores(dir.path());
    // Warm the index, so the second call reads records rather than making them.
    info(&with).unwrap();
    let info_with = info(&with).unwrap();
    assert_eq!(info_with.index_status, IndexStatus::Current);
    let info_without = info(&without).unwrap();
    assert_eq!(info_without.index_status, IndexStatus::Unavailable);
    assert_eq!(comparable(&info_with), comparable(&info_without));
    assert_eq!(info_without.allocated.total, du(without.store_dir()));
    assert_eq!(info_with.allocated.total, du(with.store_dir()));
    assert_eq!(info_with.kinds["package"].store_paths, 2, "{info_with:?}");
    assert_eq!(info_with.kinds["files"].store_paths, 1, "{info_with:?}");

    // The handles' own temp roots keep everything; fresh handles see only the real roots.
    drop((with, without));
    let with = open(&dir.path().join("with"), true);
    let without = open(&dir.path().join("without"), false);
    let options = GcOptions::default();
    let dry_with = gc(
        &with,
        GcOptions {
            dry_run: true,
            ..options
        },
    )
    .unwrap();
    let dry_without = gc(
        &without,
        GcOptions {
            dry_run: true,
            ..options
        },
    )
    .unwrap();
    assert_eq!(comparable_gc(&dry_with), comparable_gc(&dry_without));
    assert_eq!(dry_with.store_paths_removed.len(), 1, "{dry_with:?}");

    let before = du(with.store_dir());
    let index_before = info(&with).unwrap().allocated.index;
    let real_with = gc(&with, options).unwrap();
    let real_without = gc(&without, options).unwrap();
    // What the index (inside the store) grew by while GC recorded its findings is netted out, so
    // `bytes_freed` is the drop `du` sees.
    assert_eq!(real_with.bytes_freed, before - du(with.store_dir()));
    let index_growth = info(&with).unwrap().allocated.index - index_before;
    assert_eq!(
        real_with.bytes_freed + index_growth,
        real_without.bytes_freed
    );
    let mut netted = comparable_gc(&real_with);
    netted.bytes_freed += index_growth;
    assert_eq!(netted, comparable_gc(&real_without));
    assert_eq!(real_with.store_paths_removed, dry_with.store_paths_removed);
    let after_with = info(&with).unwrap();
    let after_without = info(&without).unwrap();
    assert_eq!(comparable(&after_with), comparable(&after_without));
    assert_eq!(after_with.allocated.total, du(with.store_dir()));
}

#[test]
fn a_corrupt_index_file_is_rebuilt_with_a_warning() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    populate(&store, dir.path());
    let before = info(&store).unwrap();
    let location = store.index_location().unwrap().to_path_buf();
    drop(store);

    let data = location.join("data.mdb");
    std::fs::write(&data, vec![0xA5_u8; 64 * 1024]).unwrap();
    let store = reopen(dir.path());
    let after = info(&store).expect("a damaged index is never an error");
    assert!(
        matches!(&after.index_status, IndexStatus::Rebuilt { reason } if reason.contains("could not be read")),
        "{:?}",
        after.index_status
    );
    assert_eq!(comparable(&after), comparable(&before));
    let warnings = store.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("warning: the store index in") && w.contains("made again")),
        "{warnings:?}"
    );
    assert_eq!(info(&store).unwrap().index_status, IndexStatus::Current);
    // The ref/tag caches work in the new environment too.
    store.index().unwrap().put("refs", b"k", b"v").unwrap();
}

#[test]
fn a_damaged_record_is_rebuilt_with_a_warning() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    let (kept, ..) = populate(&store, dir.path());
    let before = info(&store).unwrap();
    store
        .index()
        .unwrap()
        .put(PATHS_TABLE, kept.name().as_str().as_bytes(), b"{not json")
        .unwrap();
    let after = info(&store).unwrap();
    assert!(
        matches!(after.index_status, IndexStatus::Rebuilt { .. }),
        "{:?}",
        after.index_status
    );
    assert_eq!(comparable(&after), comparable(&before));
    let warnings = store.take_warnings();
    assert!(
        warnings.iter().any(|w| w.contains("damaged")),
        "{warnings:?}"
    );
}

#[test]
fn path_info_has_references_size_registration_and_the_roots_of_the_last_gc() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    let (kept, _, generation) = populate(&store, dir.path());
    let info_before = store.path_info(generation.name()).unwrap().unwrap();
    assert_eq!(info_before.references, vec![kept.name().to_string()]);
    assert_eq!(info_before.disk_bytes, du(generation.path()));
    assert!(info_before.registered > 1_600_000_000);
    assert_eq!(info_before.roots_recorded_at, None);
    drop(store);

    let store = reopen(dir.path());
    gc(&store, GcOptions::default()).unwrap();
    let kept_info = store.path_info(kept.name()).unwrap().unwrap();
    // The slot names it, the history reaches it through the generation.
    assert_eq!(kept_info.roots.len(), 2, "{kept_info:?}");
    assert!(kept_info.roots[0].starts_with("history "), "{kept_info:?}");
    assert_eq!(kept_info.roots[1], "slot slot-kept");
    assert!(kept_info.roots_recorded_at.is_some());
    assert_eq!(kept_info.disk_bytes, du(kept.path()));
    let generation_info = store.path_info(generation.name()).unwrap().unwrap();
    assert_eq!(generation_info.roots, kept_info.roots[..1].to_vec());
}

#[test]
fn verify_corrects_records_that_disagree_with_the_filesystem() {
    let dir = TestDir::new();
    let store = open(dir.path(), true);
    let (kept, ..) = populate(&store, dir.path());
    let before = info(&store).unwrap();
    // A record whose stamp matches but whose sizes are wrong (only `store verify` can tell).
    let index = store.index().unwrap();
    let key = kept.name().as_str().as_bytes();
    let mut record: serde_json::Value =
        serde_json::from_slice(&index.get(PATHS_TABLE, key).unwrap().unwrap()).unwrap();
    record["own_bytes"] = serde_json::json!(1);
    index
        .put(PATHS_TABLE, key, &serde_json::to_vec(&record).unwrap())
        .unwrap();
    assert_ne!(comparable(&info(&store).unwrap()), comparable(&before));

    let report = verify(&store, VerifyOptions::default()).unwrap();
    assert!(
        report.is_clean(),
        "a wrong record is not damage: {report:?}"
    );
    assert_eq!(report.index_corrected.len(), 1, "{report:?}");
    assert!(
        report.index_corrected[0].starts_with(&format!("{}: size recorded", kept.name())),
        "{report:?}"
    );
    assert_eq!(comparable(&info(&store).unwrap()), comparable(&before));
    let again = verify(&store, VerifyOptions::default()).unwrap();
    assert_eq!(again.index_corrected, Vec::<String>::new());
}
