//! Several processes on one store: publishers racing each other and a GC loop, and processes killed
//! with SIGKILL at random points of publishing and collecting. Children are this test binary re-run
//! with `AGENTPACK_STORE_TEST_CHILD` selecting their role (the `child` test, ignored otherwise).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap (working agreement)

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentpack_store::{
    gc, hash_tree, matches_tree_hash, verify, GcOptions, LinkMode, Match, PackageTree, PlannedFile,
    SlotState, Source, Store, StoreOptions, StorePathName, VerifyOptions,
};
use common::{write, TestDir};

const CHILD_ENV: &str = "AGENTPACK_STORE_TEST_CHILD";

fn open(dir: &Path) -> Store {
    Store::open(
        &dir.join("cache"),
        StoreOptions {
            link_mode: Some(LinkMode::Auto),
            flush: false,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// A package tree for `variant` in a scratch dir of the caller.
fn make_tree(scratch: &Path, variant: u64) -> PathBuf {
    let root = scratch.join(format!("tree-{variant}-{}", std::process::id()));
    if root.exists() {
        common::unseal(&root);
        std::fs::remove_dir_all(&root).unwrap();
    }
    write(
        &root,
        "SKILL.md",
        format!("# variant {variant}\n").as_bytes(),
    );
    write(&root, "common/shared.md", b"shared by every variant\n");
    for i in 0..(variant % 5 + 3) {
        write(
            &root,
            &format!("files/{i}.txt"),
            format!("{variant}-{i}\n").repeat(50).as_bytes(),
        );
    }
    write(
        &root,
        "big.bin",
        &vec![(variant % 251) as u8; 64 * 1024 + variant as usize],
    );
    common::symlink(&root, "link", "files");
    root
}

fn spawn(role: &str, dir: &Path, extra: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "stress::child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{role}|{}|{extra}", dir.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child processes' entry point (does nothing unless run as a child).
#[test]
#[ignore = "run by the stress tests as a child process"]
fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, '|');
    let (role, dir, extra) = (
        parts.next().unwrap(),
        PathBuf::from(parts.next().unwrap()),
        parts.next().unwrap(),
    );
    match role {
        "publisher" => publisher(&dir, extra.parse().unwrap()),
        "collector" => collector(&dir),
        "crasher" => crasher(&dir, extra.parse().unwrap()),
        other => panic!("unknown role {other}"),
    }
}

/// 25 rounds: publish an overlapping variant (shared by several workers) or a distinct one, check it,
/// put it in a slot, and build a generation that references it.
fn publisher(dir: &Path, worker: u64) {
    let store = open(dir);
    let scratch = dir.join(format!("scratch-{worker}"));
    for round in 0..25u64 {
        let variant = if round % 2 == 0 {
            (round / 2 + worker) % 4
        } else {
            1000 + worker * 100 + round
        };
        let src = make_tree(&scratch, variant);
        let expected = hash_tree(&src).unwrap();
        let path = store
            .publish_tree(&src, &format!("v{variant}"), Some(&expected))
            .unwrap();
        assert_eq!(
            hash_tree(path.path()).unwrap(),
            expected,
            "published path complete"
        );
        store.set_slot(&format!("slot-{variant}"), &path).unwrap();
        let name = StorePathName::from_inputs(
            format!("gen-{worker}-{}", round % 3).as_bytes(),
            "generation",
        );
        let plan = vec![
            PlannedFile::new(
                "skill/SKILL.md",
                Source::ExistingFile(path.path().join("SKILL.md")),
                false,
            ),
            PlannedFile::new(
                "settings.json",
                Source::Bytes(format!("{{\"worker\":{worker}}}").into_bytes()),
                false,
            ),
        ];
        let generation = store
            .publish_files(&name, &plan, std::slice::from_ref(&path))
            .unwrap();
        store
            .add_generation_root(&format!("worker-{worker}"), &generation)
            .unwrap();
        if round % 5 == 0 {
            let dest = scratch.join(format!("staged-{round}"));
            store.materialize(&generation, &dest).unwrap();
        }
    }
}

/// GC and verify in a loop until the parent creates `stop`.
fn collector(dir: &Path) {
    let store = open(dir);
    while !dir.join("stop").exists() {
        gc(
            &store,
            GcOptions {
                dry_run: false,
                keep_generations: 1,
                older_than: None,
            },
        )
        .unwrap();
        let report = verify(&store, VerifyOptions::default()).unwrap();
        assert!(report.is_clean(), "{report:?}");
    }
}

/// Publish and collect forever (until killed).
fn crasher(dir: &Path, seed: u64) {
    let store = open(dir);
    let scratch = dir.join(format!("scratch-crash-{}", std::process::id()));
    let mut round = seed;
    loop {
        round += 1;
        let variant = round % 7;
        let src = make_tree(&scratch, variant);
        // Every other round a batch of two trees (one flush for both), so kills also land
        // between a batch's flush and its renames; an input-addressed path (a repository
        // snapshot kept by a sync) is staged before the batch and placed after its flush.
        let path = if round % 2 == 0 {
            let other = (variant + 3) % 7;
            let second = make_tree(&scratch.join("second"), other);
            let (label, other_label) = (format!("v{variant}"), format!("v{other}"));
            let kept_name = StorePathName::from_inputs(
                format!("snapshot-{}", round % 5).as_bytes(),
                "snapshot",
            );
            let kept = store
                .stage_built(&kept_name, &[], |out, _| {
                    std::fs::write(out.join("tree.tar.gz"), format!("{}", round % 5))?;
                    Ok(())
                })
                .unwrap();
            let mut published = store
                .publish_trees(&[
                    PackageTree::new(&src, &label, None),
                    PackageTree::new(&second, &other_label, None),
                ])
                .unwrap();
            store.place_built(kept).unwrap();
            let second_path = published.pop().unwrap().unwrap();
            store
                .set_slot(&format!("slot-b{}", round % 3), &second_path)
                .unwrap();
            published.pop().unwrap().unwrap()
        } else {
            store
                .publish_tree(&src, &format!("v{variant}"), None)
                .unwrap()
        };
        store
            .set_slot(&format!("slot-{}", round % 3), &path)
            .unwrap();
        let name =
            StorePathName::from_inputs(format!("gen-{}", round % 4).as_bytes(), "generation");
        let plan = vec![
            PlannedFile::new(
                "a/SKILL.md",
                Source::ExistingFile(path.path().join("SKILL.md")),
                false,
            ),
            PlannedFile::new(
                "b.txt",
                Source::Bytes(format!("{round}").into_bytes()),
                round % 2 == 0,
            ),
        ];
        let generation = store
            .publish_files(&name, &plan, std::slice::from_ref(&path))
            .unwrap();
        store.add_generation_root("crash", &generation).unwrap();
        if round % 3 == 0 {
            gc(
                &store,
                GcOptions {
                    dry_run: false,
                    keep_generations: 2,
                    older_than: None,
                },
            )
            .unwrap();
        }
    }
}

fn wait_ok(child: Child, what: &str) {
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every slot and every generation root names a complete store path; verify is clean.
fn assert_store_consistent(store: &Store) {
    let report = verify(store, VerifyOptions::default()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    for (key, _) in store.slots().unwrap() {
        match store.slot_state(&key).unwrap() {
            SlotState::Linked(path) => {
                let recorded = store.meta(&path).unwrap().tree_hash.unwrap();
                assert_eq!(
                    matches_tree_hash(path.path(), &recorded).unwrap(),
                    Match::Exact,
                    "slot {key}"
                );
            }
            SlotState::Dangling(target) => panic!("slot {key} dangles: {}", target.display()),
            other => panic!("slot {key}: {other:?}"),
        }
    }
}

#[test]
fn eight_publishers_and_a_collector_agree() {
    let dir = TestDir::new();
    open(dir.path()); // create the layout once
    let collector = spawn("collector", dir.path(), "");
    let publishers: Vec<Child> = (0..8)
        .map(|w| spawn("publisher", dir.path(), &w.to_string()))
        .collect();
    for (worker, child) in publishers.into_iter().enumerate() {
        wait_ok(child, &format!("publisher {worker}"));
    }
    std::fs::write(dir.path().join("stop"), b"").unwrap();
    wait_ok(collector, "collector");

    let store = open(dir.path());
    assert_store_consistent(&store);
    // Every worker's newest generation survived every GC and is complete.
    for worker in 0..8 {
        let history = store
            .generation_history(&format!("worker-{worker}"))
            .unwrap();
        let newest = store
            .get(&history[0].name)
            .expect("rooted generation exists");
        let meta = store.meta(&newest).unwrap();
        for reference in &meta.references {
            assert!(
                store.get(&reference.parse().unwrap()).is_some(),
                "reference {reference} kept"
            );
        }
        assert!(newest.path().join("skill/SKILL.md").is_file());
    }
    // 4 shared variants + 8 workers x 12 distinct ones.
    assert_eq!(store.slots().unwrap().len(), 4 + 8 * 12);
    let report = gc(&store, GcOptions::default()).unwrap();
    assert!(
        verify(&store, VerifyOptions::default()).unwrap().is_clean(),
        "{report:?}"
    );
}

#[test]
fn sigkill_at_random_points_leaves_nothing_half_written() {
    let dir = TestDir::new();
    open(dir.path());
    let started = Instant::now();
    let mut rounds = 0u64;
    let mut interrupted = 0usize;
    // A small xorshift: reproducible without another dependency.
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    while rounds < 200 && started.elapsed() < Duration::from_secs(30) {
        // Two at a time, so kills also land while another process holds locks.
        let children: Vec<Child> = (0..2)
            .map(|i| spawn("crasher", dir.path(), &(rounds * 2 + i).to_string()))
            .collect();
        std::thread::sleep(Duration::from_millis(20 + next() % 100));
        for mut child in children {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
        // Builds cut short leave their temp dirs behind (until a GC): proof the kills land mid-work.
        interrupted += std::fs::read_dir(dir.path().join("cache/store/v1/.tmp"))
            .unwrap()
            .count();
        rounds += 1;
        if rounds % 25 == 0 {
            assert_store_consistent(&open(dir.path()));
        }
    }
    assert!(rounds >= 50, "only {rounds} rounds in the time box");
    let store = open(dir.path());
    assert_store_consistent(&store);
    // Nothing half-written under a final name: every store path matches its metadata (verify above),
    // and a GC then clears every leftover of the killed processes.
    let report = gc(
        &store,
        GcOptions {
            dry_run: false,
            keep_generations: 2,
            older_than: None,
        },
    )
    .unwrap();
    assert_store_consistent(&store);
    let tmp_left = std::fs::read_dir(store.store_dir().join(".tmp"))
        .unwrap()
        .count();
    assert_eq!(tmp_left, 0, "{report:?}");
    assert!(
        interrupted > 0,
        "no kill landed in the middle of a publication or a GC"
    );
    println!(
        "{rounds} kill rounds in {:?}, {interrupted} leftover entries seen after kills (cumulative)",
        started.elapsed()
    );
}
