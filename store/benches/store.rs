//! Store benchmarks against the tools a user would compare with, on the same data and filesystem:
//!
//! * `sha256-tree-v1` of a tree holding one large file vs `sha256sum` of that file (goal >= 0.9x);
//! * materializing a 1,000-file store path vs `cp -al` (goal within 1.5x) and `cp -r`;
//! * publishing a 1,000-file package; GC of 1,000 dead generations (goal < 1 s).
//!
//! Run: `cargo bench -p agentpack-store` (or `bench/store/run.sh`, which adds peak memory).
//! `AGENTPACK_BENCH_MB` sets the large file's size (default 512), `AGENTPACK_BENCH_DIR` where data goes
//! (default: the system temp dir). Prints a Markdown table; the times are the best of several runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentpack_store::{
    gc, hash_tree, GcOptions, LinkMode, PlannedFile, Source, Store, StoreOptions, StorePathName,
};

fn best_of<F: FnMut() -> Duration>(runs: usize, mut f: F) -> Duration {
    (0..runs).map(|_| f()).min().unwrap()
}

fn time<F: FnOnce()>(f: F) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn unseal_remove(path: &Path) {
    if !path.exists() {
        return;
    }
    let _ = Command::new("chmod").args(["-R", "u+w"]).arg(path).status();
    let _ = std::fs::remove_dir_all(path);
}

fn run(cmd: &mut Command) {
    let status = cmd.status().expect("spawn");
    assert!(status.success(), "{cmd:?} failed");
}

fn make_tree(root: &Path, files: usize, salt: &str) {
    for i in 0..files {
        let path = root.join(format!("d{:02}/f{i:04}.md", i % 50));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let body = format!("{salt} file {i}\n").repeat(64 + i % 200);
        std::fs::write(&path, body).unwrap();
        if i % 10 == 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    // `--hash-only DIR`: print the tree hash of DIR (bench/store/run.sh measures its peak memory).
    if let Some(position) = args.iter().position(|a| a == "--hash-only") {
        let dir = PathBuf::from(&args[position + 1]);
        println!("{}", hash_tree(&dir).unwrap());
        return;
    }
    let mb: usize = std::env::var("AGENTPACK_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    let parent = std::env::var_os("AGENTPACK_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let work = tempfile::tempdir_in(&parent).unwrap();
    let root = work.path();
    let store = Store::open(
        &root.join("cache"),
        StoreOptions {
            link_mode: Some(LinkMode::Auto),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let mut rows: Vec<(String, String, String)> = Vec::new();

    // 1. Hashing throughput.
    let big_dir = root.join("big");
    std::fs::create_dir(&big_dir).unwrap();
    let big = big_dir.join("data.bin");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&big).unwrap();
        let chunk: Vec<u8> = (0..1024 * 1024)
            .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        for _ in 0..mb {
            file.write_all(&chunk).unwrap();
        }
    }
    let _ = hash_tree(&big_dir).unwrap(); // warm the page cache
    let ours = best_of(3, || {
        time(|| {
            let _ = std::hint::black_box(hash_tree(&big_dir).unwrap());
        })
    });
    let theirs = best_of(3, || {
        time(|| {
            run(Command::new("sha256sum")
                .arg(&big)
                .stdout(std::process::Stdio::null()))
        })
    });
    let mbs = |d: Duration| mb as f64 / d.as_secs_f64();
    rows.push((
        format!("sha256-tree-v1 of one {mb} MiB file vs `sha256sum`"),
        format!("{:.0} MB/s vs {:.0} MB/s", mbs(ours), mbs(theirs)),
        format!(
            "{:.2}x throughput",
            theirs.as_secs_f64() / ours.as_secs_f64()
        ),
    ));
    std::fs::remove_dir_all(&big_dir).unwrap();

    // 2. A 1,000-file package: publish, then materialize vs cp -al / cp -r.
    let src = root.join("src");
    make_tree(&src, 1000, "a");
    let _ = hash_tree(&src).unwrap();
    let publish = time(|| drop(store.publish_tree(&src, "bench", None).unwrap()));
    let unflushed = {
        let src2 = root.join("src2");
        make_tree(&src2, 1000, "b");
        let _ = hash_tree(&src2).unwrap();
        let quick = Store::open(
            &root.join("cache"),
            StoreOptions {
                link_mode: Some(LinkMode::Auto),
                flush: false,
                ..StoreOptions::default()
            },
        )
        .unwrap();
        time(|| drop(quick.publish_tree(&src2, "bench2", None).unwrap()))
    };
    let package = store.publish_tree(&src, "bench", None).unwrap();
    let files_hash = best_of(3, || {
        time(|| {
            let _ = std::hint::black_box(hash_tree(&src).unwrap());
        })
    });
    rows.push((
        "publish a 1,000-file package (first time: copy into blobs, hash, link)".into(),
        format!(
            "{:.1} ms ({:.1} ms without the flush)",
            publish.as_secs_f64() * 1e3,
            unflushed.as_secs_f64() * 1e3
        ),
        format!("hash alone {:.1} ms", files_hash.as_secs_f64() * 1e3),
    ));
    let mut n = 0;
    let mut dest = || {
        n += 1;
        root.join(format!("out-{n}"))
    };
    let ours = best_of(5, || {
        let d = dest();
        let t = time(|| drop(store.materialize(&package, &d).unwrap()));
        unseal_remove(&d);
        t
    });
    let cp_al = best_of(5, || {
        let d = dest();
        let t = time(|| run(Command::new("cp").arg("-al").arg(package.path()).arg(&d)));
        unseal_remove(&d);
        t
    });
    let cp_r = best_of(5, || {
        let d = dest();
        let t = time(|| run(Command::new("cp").arg("-r").arg(package.path()).arg(&d)));
        unseal_remove(&d);
        t
    });
    let report = store.materialize(&package, &dest()).unwrap();
    let method = report.method().map(|m| m.to_string()).unwrap_or_default();
    rows.push((
        format!("materialize 1,000 files ({method}) vs `cp -al`"),
        format!(
            "{:.1} ms vs {:.1} ms",
            ours.as_secs_f64() * 1e3,
            cp_al.as_secs_f64() * 1e3
        ),
        format!(
            "{:.2}x the time of cp -al",
            ours.as_secs_f64() / cp_al.as_secs_f64()
        ),
    ));
    rows.push((
        format!("materialize 1,000 files ({method}) vs `cp -r`"),
        format!(
            "{:.1} ms vs {:.1} ms",
            ours.as_secs_f64() * 1e3,
            cp_r.as_secs_f64() * 1e3
        ),
        format!(
            "{:.2}x the time of cp -r",
            ours.as_secs_f64() / cp_r.as_secs_f64()
        ),
    ));

    // 3. GC of 1,000 dead generations (5 files each, sharing most blobs).
    let collector = {
        let builder = Store::open(
            &root.join("cache"),
            StoreOptions {
                link_mode: Some(LinkMode::Auto),
                flush: false,
                ..StoreOptions::default()
            },
        )
        .unwrap();
        let shared = builder
            .import_bytes(b"shared settings\n", false)
            .unwrap()
            .unwrap();
        let build = time(|| {
            for g in 0..1000 {
                let name =
                    StorePathName::from_inputs(format!("generation {g}").as_bytes(), "generation");
                let plan = vec![
                    PlannedFile::new("settings.json", Source::Blob(shared), false),
                    PlannedFile::new("claude/skills/a/SKILL.md", Source::Blob(shared), false),
                    PlannedFile::new(
                        "codex/AGENTS.md",
                        Source::Bytes(format!("g{g}\n").into_bytes()),
                        false,
                    ),
                    PlannedFile::new("hooks/run.sh", Source::Bytes(b"#!/bin/sh\n".to_vec()), true),
                    PlannedFile::new(
                        "codex/skills",
                        Source::Symlink("../claude/skills".into()),
                        false,
                    ),
                ];
                builder.publish_files(&name, &plan, &[]).unwrap();
            }
        });
        rows.push((
            "publish 1,000 generations of 5 entries (publish_files, no flush)".into(),
            format!("{:.0} ms", build.as_secs_f64() * 1e3),
            format!("{:.2} ms each", build.as_secs_f64() * 1e3 / 1000.0),
        ));
        drop(builder);
        Store::open(&root.join("cache"), StoreOptions::default()).unwrap()
    };
    drop(store);
    let mut removed = 0;
    let gc_time = time(|| {
        let report = gc(
            &collector,
            GcOptions {
                dry_run: false,
                keep_generations: 0,
                older_than: None,
            },
        )
        .unwrap();
        removed = report.store_paths_removed.len();
    });
    rows.push((
        format!("gc of {removed} dead store paths (1,000 generations + the package)"),
        format!("{:.0} ms", gc_time.as_secs_f64() * 1e3),
        if gc_time < Duration::from_secs(1) {
            "under 1 s".into()
        } else {
            "OVER 1 s".into()
        },
    ));

    println!("| benchmark | measured | ratio / goal |");
    println!("| --- | --- | --- |");
    for (name, measured, ratio) in rows {
        println!("| {name} | {measured} | {ratio} |");
    }
    let fs = agentpack_store::filesystem_kind(root)
        .map(|k| k.name)
        .unwrap_or_default();
    println!(
        "\nfilesystem: {fs}; cores: {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
}
