//! Cold sync and generation build of 100 plugins against their floors (run with
//! `bench/fetch-build.sh`, i.e. `cargo bench -p agentpack-cli --bench fetch_build -- --bench`).
//!
//! The data is shaped like a plugin marketplace split over repositories: 10 repositories on the
//! local fake GitHub, each holding 10 plugins (a manifest, 3 skills with a reference file, 2
//! commands, 1 agent: 10 files a plugin, 1,000 locked files) and 60 files the lock does not need
//! (docs, a README). A project locks all 100 plugins at one commit per repository.
//!
//! - **cold sync**: a fresh `AGENTPACK_HOME` with the committed `pack.lock` runs `agentpack sync`
//!   (download, extract, verify, publish, render for six agents), against a bash script doing the
//!   same downloads with `curl`, `tar xzf` each archive and `cp -al` each locked package
//!   directory: one after another, and with the 10 downloads in parallel (`xargs -P 10`); and
//!   the sequential script ending with `sync -f` (one `syncfs`), because a sync's packages are on
//!   disk when it returns (the store flushes what it publishes) and the plain scripts' are not;
//! - **generation build**: with every package in the store, a changed overlay file forces a new
//!   generation; against `cp -al` of the resulting generation tree;
//! - **no-op sync** of the same project (the fast path), for scale.
//!
//! Ratios in one run, medians; nothing here is asserted (performance is measured, not tested).
//! `AGENTPACK_BENCH_STRACE=<file>` adds one cold sync under `strace -f -c -w` (wall time per system
//! call) and writes the summary there, and one under `strace -f -ttt` tracing every call with its
//! time into `<file>.calls` (where the time goes by phase), counting the opens of the locked
//! `reference.md` files (read only to be copied and hashed: opens per file = passes over it).
//! `AGENTPACK_BENCH_BASELINE=<agentpack binary>` times that binary's cold sync too, interleaved in
//! every round (a before/after ratio in one run); with `AGENTPACK_BENCH_STRACE` it is traced as
//! well (`<file>.baseline`). `AGENTPACK_BENCH_BIN=<agentpack binary>` measures that binary instead
//! of the one cargo built. `AGENTPACK_BENCH_PERF=<file>` adds one cold sync under `perf record -g`
//! into that file; `AGENTPACK_BENCH_LOG=<file>` one cold sync with `-v`, each debug line stamped with
//! the milliseconds since its start. `AGENTPACK_BENCH_ONLY=cold-sync` stops after the cold sync rows.
//!
//! Every temporary directory (the fake GitHub's repositories, each `AGENTPACK_HOME`, project and
//! staging root, the floors' output) is made under `TMPDIR`: `bench/fetch-build.sh` points it at a
//! dedicated ext4 mounted for the run, so a flush waits only for this run's writes.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentpack_test_support::{Endpoint, FakeGitHub, IsolatedHome};

mod support;
use support::{bin, median, ms, runs, timed};

const REPOS: usize = 10;
const PLUGINS: usize = 10;

/// The binary measured: `AGENTPACK_BENCH_BIN` (a copy other builds cannot replace mid-run), else
/// the one cargo built for this bench.
fn agentpack() -> PathBuf {
    std::env::var_os("AGENTPACK_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(bin)
}

fn run(home: &IsolatedHome, github: Option<&FakeGitHub>, args: &[&str]) -> Duration {
    timed(home.command(&agentpack(), github).args(args))
}

/// One repository of the benchmark: `owner/repo`, its commit, the locked package paths in it.
type Repository = (String, String, Vec<String>);

/// The repositories; returns the `[dependencies]` lines and the repositories.
fn marketplace(github: &FakeGitHub) -> (Vec<String>, Vec<Repository>) {
    let mut deps = Vec::new();
    let mut repos = Vec::new();
    for r in 0..REPOS {
        let name = format!("market{r}");
        let repo = github.repo("bench", &name);
        let mut paths = Vec::new();
        for p in 0..PLUGINS {
            let (dir, dependency) = support::write_market_plugin(&repo, &name, r, p);
            deps.push(dependency);
            paths.push(dir);
        }
        for d in 0..60 {
            repo.write(
                &format!("docs/page{d}.md"),
                format!("documentation page {d}\n").repeat(120),
            );
        }
        repo.write("README.md", "A marketplace.\n");
        let commit = repo.commit("plugins");
        repo.tag("v1.0.0");
        repos.push((format!("bench/{name}"), commit, paths));
    }
    (deps, repos)
}

fn write_manifest(dir: &Path, deps: &[String]) {
    let mut text = String::from("name = \"bench\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
    for dep in deps {
        text.push_str(dep);
        text.push('\n');
    }
    std::fs::write(dir.join("agentpack.toml"), text).unwrap();
}

/// How a floor script runs its downloads, and whether it flushes what it wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Floor {
    Sequential,
    Parallel,
    /// One after another, then `sync -f` of the result: as durable as a sync's publication.
    Durable,
}

/// The floor: the same archives with curl, extracted with tar, each locked package linked with
/// `cp -al`. [`Floor::Parallel`]: the downloads and extractions run 10 at a time.
fn floor_script(dir: &Path, api: &str, repos: &[Repository], floor: Floor) -> PathBuf {
    let parallel = floor == Floor::Parallel;
    let mut script = String::from("set -euo pipefail\ncd \"$1\"\nmkdir work out\n");
    script.push_str("fetch() { mkdir -p \"work/$2\" && curl -sSf -o \"work/$2.tgz\" \"$API/repos/$1/tarball/$3\" && tar xzf \"work/$2.tgz\" -C \"work/$2\" --strip-components=1; }\nexport -f fetch\n");
    script.push_str(&format!("export API={api}\n"));
    let jobs: Vec<String> = repos
        .iter()
        .enumerate()
        .map(|(index, (repo, commit, _))| format!("{repo} r{index} {commit}"))
        .collect();
    if parallel {
        script.push_str(&format!(
            "printf '%s\\n' {} | xargs -P 10 -L 1 bash -c 'fetch \"$0\" \"$1\" \"$2\"'\n",
            jobs.iter()
                .map(|job| format!("'{job}'"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    } else {
        for job in &jobs {
            script.push_str(&format!("fetch {job}\n"));
        }
    }
    for (index, (_, _, paths)) in repos.iter().enumerate() {
        for (p, path) in paths.iter().enumerate() {
            script.push_str(&format!("cp -al work/r{index}/{path} out/r{index}-p{p}\n"));
        }
    }
    if floor == Floor::Durable {
        script.push_str("sync -f out\n");
    }
    let file = dir.join(match floor {
        Floor::Sequential => "floor.sh",
        Floor::Parallel => "floor-parallel.sh",
        Floor::Durable => "floor-durable.sh",
    });
    std::fs::write(&file, script).unwrap();
    file
}

/// Runs a floor script in `dir`, timed; the previous run's output is removed first and the removal
/// flushed, untimed (a cold sync has nothing to remove either).
fn time_script(script: &Path, dir: &Path) -> Duration {
    for previous in ["work", "out"] {
        let path = dir.join(previous);
        if path.exists() {
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
    assert!(Command::new("sync")
        .arg("-f")
        .arg(dir)
        .status()
        .unwrap()
        .success());
    let start = Instant::now();
    let status = Command::new("bash").arg(script).arg(dir).status().unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "{}", script.display());
    elapsed
}

fn count_files(dir: &Path) -> usize {
    walkdir(dir, &mut |_| {})
}

fn walkdir(dir: &Path, visit: &mut dyn FnMut(&Path)) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            count += walkdir(&entry.path(), visit);
        } else {
            visit(&entry.path());
            count += 1;
        }
    }
    count
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`; only measure under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let runs = runs(5);
    let cold_only = std::env::var("AGENTPACK_BENCH_ONLY").is_ok_and(|only| only == "cold-sync");
    println!(
        "temporary directories under {}",
        std::env::temp_dir().display()
    );
    let github = FakeGitHub::start();
    let (deps, repos) = marketplace(&github);
    let author = IsolatedHome::new();
    write_manifest(&author.project, &deps);
    run(&author, Some(&github), &["lock", "--quiet"]);
    let lock = std::fs::read(author.project.join("pack.lock")).unwrap();

    // Cold sync from a committed lock, a fresh home each run; interleaved with the floors.
    let scratch = tempfile::tempdir().unwrap();
    let sequential = floor_script(scratch.path(), &github.api_url(), &repos, Floor::Sequential);
    let parallel = floor_script(scratch.path(), &github.api_url(), &repos, Floor::Parallel);
    let durable = floor_script(scratch.path(), &github.api_url(), &repos, Floor::Durable);
    let baseline = std::env::var_os("AGENTPACK_BENCH_BASELINE").map(PathBuf::from);
    let (mut syncs, mut floors, mut parallel_floors) = (Vec::new(), Vec::new(), Vec::new());
    let mut durable_floors = Vec::new();
    let mut baseline_syncs = Vec::new();
    let mut tarballs = Vec::new();
    let mut last = None;
    let cold_home = || {
        let home = IsolatedHome::new();
        write_manifest(&home.project, &deps);
        std::fs::write(home.project.join("pack.lock"), &lock).unwrap();
        home
    };
    // Every timed side starts on a clean filesystem: what the previous side wrote or removed is
    // flushed first, untimed, so a flush inside a side waits for that side's own writes only.
    let settle = || {
        assert!(Command::new("sync")
            .arg("-f")
            .arg(scratch.path())
            .status()
            .unwrap()
            .success())
    };
    for _ in 0..runs {
        let home = cold_home();
        github.reset_counters();
        settle();
        syncs.push(run(&home, Some(&github), &["sync", "--quiet"]));
        tarballs.push(github.total(Endpoint::Tarball) + github.total(Endpoint::GitHttp));
        settle();
        floors.push(time_script(&sequential, scratch.path()));
        if let Some(baseline) = &baseline {
            let other = cold_home();
            settle();
            baseline_syncs.push(timed(
                other
                    .command(baseline, Some(&github))
                    .args(["sync", "--quiet"]),
            ));
        }
        settle();
        parallel_floors.push(time_script(&parallel, scratch.path()));
        settle();
        durable_floors.push(time_script(&durable, scratch.path()));
        last = Some(home);
    }
    let home = last.unwrap();
    let mut opens = Vec::new();
    if let Ok(summary) = std::env::var("AGENTPACK_BENCH_STRACE") {
        let mut binaries = vec![(agentpack(), summary.clone())];
        if let Some(baseline) = &baseline {
            binaries.push((baseline.clone(), format!("{summary}.baseline")));
        }
        for (binary, summary) in binaries {
            // One more cold sync under `strace -f -c -w` (wall time per system call) into that file.
            let traced = cold_home();
            let mut command = traced.command(Path::new("strace"), Some(&github));
            command
                .args(["-f", "-c", "-w", "-o", &summary])
                .arg(&binary)
                .args(["sync", "--quiet"]);
            assert!(command.status().unwrap().success());
            // And one tracing every call with its time (`<file>.calls`, for a split by phase):
            // how often each locked reference file is opened.
            let traced = cold_home();
            let log = format!("{summary}.calls");
            let mut command = traced.command(Path::new("strace"), Some(&github));
            command
                .args(["-f", "-ttt", "-o", &log])
                .arg(&binary)
                .args(["sync", "--quiet"]);
            assert!(command.status().unwrap().success());
            let text = std::fs::read_to_string(&log).unwrap();
            let count = text
                .lines()
                .filter(|line| {
                    line.contains("openat(")
                        && line.contains("/reference.md\"")
                        && !line.contains("= -1")
                })
                .count();
            opens.push((binary, count));
        }
    }
    if let Ok(profile) = std::env::var("AGENTPACK_BENCH_PERF") {
        // One more cold sync under `perf record -g` (call graphs of user and kernel time).
        let traced = cold_home();
        let mut command = traced.command(Path::new("perf"), Some(&github));
        command
            .args(["record", "-q", "-g", "-o", &profile, "--"])
            .arg(agentpack())
            .args(["sync", "--quiet"]);
        assert!(command.status().unwrap().success());
    }
    if let Ok(log) = std::env::var("AGENTPACK_BENCH_LOG") {
        // One more cold sync with `-v`, each debug line stamped with the milliseconds since the
        // start as it arrives (the binary's own log has no time): where the time goes by phase.
        let traced = cold_home();
        let mut command = traced.command(&agentpack(), Some(&github));
        command
            .args(["sync", "--quiet", "-v"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let start = Instant::now();
        let mut child = command.spawn().unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut stamped = String::new();
        for line in std::io::BufRead::lines(stderr) {
            let line = line.unwrap();
            stamped.push_str(&format!(
                "{:9.1} {line}\n",
                start.elapsed().as_secs_f64() * 1000.0
            ));
        }
        assert!(child.wait().unwrap().success());
        stamped.push_str(&format!(
            "{:9.1} (exit)\n",
            start.elapsed().as_secs_f64() * 1000.0
        ));
        std::fs::write(&log, stamped).unwrap();
    }
    let locked_files = count_files(&scratch.path().join("out"));
    let rounds: Vec<String> = syncs
        .iter()
        .zip(&floors)
        .zip(&durable_floors)
        .map(|((sync, floor), durable)| {
            format!(
                "{:.2}x/{:.2}x",
                sync.as_secs_f64() / floor.as_secs_f64(),
                sync.as_secs_f64() / durable.as_secs_f64()
            )
        })
        .collect();
    let (sync, floor, parallel_floor) = (median(syncs), median(floors), median(parallel_floors));
    let durable_floor = median(durable_floors);

    println!("| benchmark | result | notes |\n| --- | --- | --- |");
    println!(
        "| cold `sync` of 100 plugins from 10 repositories, committed `pack.lock` | {} | {:.2}x the sequential floor ({}), {:.2}x the parallel floor ({}), {:.2}x the sequential floor with one `sync -f` ({}); {} archive downloads per run ({locked_files} locked files); each round against the sequential/durable floor: {} |",
        ms(sync),
        sync.as_secs_f64() / floor.as_secs_f64(),
        ms(floor),
        sync.as_secs_f64() / parallel_floor.as_secs_f64(),
        ms(parallel_floor),
        sync.as_secs_f64() / durable_floor.as_secs_f64(),
        ms(durable_floor),
        tarballs.iter().max().unwrap(),
        rounds.join(", "),
    );
    if let Some(baseline) = &baseline {
        let before = median(baseline_syncs);
        println!(
            "| cold `sync` of the baseline `{}` | {} | this binary takes {:.2}x its time; {:.2}x the sequential floor, {:.2}x the durable floor |",
            baseline.display(),
            ms(before),
            sync.as_secs_f64() / before.as_secs_f64(),
            before.as_secs_f64() / floor.as_secs_f64(),
            before.as_secs_f64() / durable_floor.as_secs_f64(),
        );
    }
    for (binary, count) in opens {
        println!(
            "| opens of the 300 locked `reference.md` files in one cold sync (`{}`) | {count} | {:.1} per file |",
            binary.display(),
            count as f64 / 300.0
        );
    }
    if cold_only {
        return;
    }

    // Generation builds: every package in the store, a changed overlay forces a new generation.
    let mut builds = Vec::new();
    for round in 0..runs {
        std::fs::create_dir_all(home.project.join(".agents/rules")).unwrap();
        std::fs::write(
            home.project.join(".agents/rules/round.md"),
            format!("round {round}\n"),
        )
        .unwrap();
        builds.push(run(&home, None, &["sync", "--quiet"]));
    }
    let build = median(builds);
    let generation = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    let staged = count_files(&generation);
    let mut copies = Vec::new();
    for round in 0..runs {
        let target = home.home.join(format!("cp-al-{round}"));
        let start = Instant::now();
        let status = Command::new("cp")
            .arg("-al")
            .arg(&generation)
            .arg(&target)
            .status()
            .unwrap();
        copies.push(start.elapsed());
        assert!(status.success());
    }
    let copy = median(copies);
    let noop = median(
        (0..runs.max(11))
            .map(|_| run(&home, None, &["sync", "--quiet"]))
            .collect(),
    );
    println!(
        "| build a generation of the 100 plugins for 6 agents ({staged} staged files) | {} | {:.2}x `cp -al` of the result ({}) |",
        ms(build),
        build.as_secs_f64() / copy.as_secs_f64(),
        ms(copy)
    );
    println!(
        "| no-op `sync` of the 100 plugins (fast path) | {} | GitHub unreachable |",
        ms(noop)
    );
}
