//! Whole-workflow benchmarks through the real binary (run with `cargo bench -p agentpack-cli`).
//!
//! Prints a Markdown table of ratios and absolute numbers; `docs/src/benchmarks.md` records a run.
//! Performance is measured here, never asserted in tests.
//!
//! - cold `lock` + fetch of 50 packages from 5 repositories over the local fake GitHub, and a warm
//!   `lock` (requests counted: the goal is none);
//! - a second `sync` of 50 packages with unchanged inputs (goal: under 30 ms);
//! - a no-op `sync` (the sync fast path) of 10 and of 100 GitHub packages and of 10 and 100 path
//!   packages, interleaved, GitHub unreachable (goals: under 30 ms at 100, at most 1.3x the
//!   10-package time); `AGENTPACK_BENCH_ONLY=noop-sync` runs this one alone;
//! - building the generation of a 1,000-file marketplace plugin for all six agents, as a ratio to
//!   `cp -al` of the resulting tree (goal: within 2x);
//! - 10 projects x 3 modes of the same packages: allocated store bytes (what `du` counts) over the
//!   unique content bytes (`bench/disk.sh` runs the 20-package case).
//! - 20 one-by-one `add`s of packages of one repository at one commit against one `lock` of the
//!   same 20 (archive downloads counted: the goal is 1 each, the repo snapshot kept in the store);
//!   `AGENTPACK_BENCH_ONLY=adds` runs this one alone.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agentpack_test_support::{Endpoint, FakeGitHub, IsolatedHome};

mod support;
use support::{bin, median, ms, timed};

fn run(home: &IsolatedHome, github: Option<&FakeGitHub>, dir: &Path, args: &[&str]) -> Duration {
    timed(home.command(&bin(), github).current_dir(dir).args(args))
}

fn write_manifest(dir: &Path, deps: &[String], modes: &str) {
    let mut text = String::from("name = \"bench\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
    for dep in deps {
        text.push_str(dep);
        text.push('\n');
    }
    text.push_str(modes);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("agentpack.toml"), text).unwrap();
}

fn lock_benchmarks(rows: &mut Vec<(String, String, String)>) {
    let github = FakeGitHub::start();
    let mut deps = Vec::new();
    for r in 0..5 {
        let repo = github.repo("bench", &format!("repo{r}"));
        for p in 0..10 {
            repo.write(
                &format!("skills/s{p}/SKILL.md"),
                format!(
                    "---\nname: r{r}-s{p}\ndescription: skill {p} of repo {r}\n---\n\n{}\n",
                    "Body line.\n".repeat(50)
                ),
            );
            repo.write(
                &format!("skills/s{p}/reference.md"),
                "reference\n".repeat(200),
            );
            deps.push(format!(
                "\"github.com/bench/repo{r}/skills/s{p}\" = \"^1.0\""
            ));
        }
        repo.commit("skills");
        repo.tag("v1.0.0");
    }
    let home = IsolatedHome::new();
    write_manifest(&home.project, &deps, "");
    let cold = run(&home, Some(&github), &home.project, &["lock", "--quiet"]);
    let tarballs = github.total(Endpoint::Tarball);
    let cold_requests = github.requests().len();
    github.reset_counters();
    let warm = median(
        (0..5)
            .map(|_| run(&home, Some(&github), &home.project, &["lock", "--quiet"]))
            .collect(),
    );
    let warm_requests = github.requests().len();
    rows.push((
        "cold `lock` + fetch, 50 packages from 5 repos".into(),
        ms(cold),
        format!("{cold_requests} requests, {tarballs} archive downloads"),
    ));
    rows.push((
        "warm `lock` (unchanged)".into(),
        ms(warm),
        format!("{warm_requests} requests in 5 runs"),
    ));

    run(&home, Some(&github), &home.project, &["sync", "--quiet"]);
    let second = median(
        (0..7)
            .map(|_| run(&home, None, &home.project, &["sync", "--quiet"]))
            .collect(),
    );
    rows.push((
        "second `sync`, 50 packages, unchanged inputs".into(),
        ms(second),
        "goal < 30 ms".into(),
    ));
}

/// A project of `count` GitHub packages (of the 10 repositories `noop_sync_benchmarks` serves),
/// locked and synced once with GitHub, then synced once more without it (the fast path's record
/// written by a full sync, and taken once).
fn noop_github_project(github: &FakeGitHub, count: usize) -> IsolatedHome {
    let home = IsolatedHome::new();
    let deps: Vec<String> = (0..count)
        .map(|i| {
            format!(
                "\"github.com/noop/repo{}/skills/s{}\" = \"^1.0\"",
                i % 10,
                i / 10
            )
        })
        .collect();
    write_manifest(&home.project, &deps, "");
    run(&home, Some(github), &home.project, &["lock", "--quiet"]);
    run(&home, Some(github), &home.project, &["sync", "--quiet"]);
    run(&home, None, &home.project, &["sync", "--quiet"]);
    home
}

/// A project of `count` path packages of one `SKILL.md` each (the shape of the launch bench's),
/// synced once (a full sync) and once more (the fast path).
fn noop_path_project(count: usize) -> IsolatedHome {
    let home = IsolatedHome::new();
    let packages = home.project.parent().unwrap().join("packages");
    let deps = support::write_skill_packages(&packages, count);
    write_manifest(&home.project, &deps, "");
    run(&home, None, &home.project, &["sync", "--quiet"]);
    run(&home, None, &home.project, &["sync", "--quiet"]);
    home
}

/// No-op `sync`s (the sync fast path) of 10 and 100 GitHub packages and of 10 and 100 path
/// packages, GitHub unreachable (an address nothing listens on, so a request would fail the run).
/// The four projects' runs are interleaved (one round syncs each once, the order rotating each
/// round), so a change of the machine's load hits every side alike; `AGENTPACK_FULL_VERIFY=1` runs
/// follow, interleaved too (each a full sync).
/// Medians, and the ratio of the 100- to the 10-package median.
/// `AGENTPACK_BENCH_KEEP=1` keeps the four projects and prints their environment (to profile one
/// run with `strace` or `valgrind`).
fn noop_sync_benchmarks(rows: &mut Vec<(String, String, String)>) {
    let github = FakeGitHub::start();
    for r in 0..10 {
        let repo = github.repo("noop", &format!("repo{r}"));
        for p in 0..10 {
            repo.write(
                &format!("skills/s{p}/SKILL.md"),
                format!(
                    "---\nname: n{r}-s{p}\ndescription: skill {p} of repo {r}\n---\n\n{}\n",
                    "Body line.\n".repeat(50)
                ),
            );
        }
        repo.commit("skills");
        repo.tag("v1.0.0");
    }
    let kinds = [("GitHub", 10), ("GitHub", 100), ("path", 10), ("path", 100)];
    let homes: Vec<IsolatedHome> = kinds
        .iter()
        .map(|(kind, count)| match *kind {
            "GitHub" => noop_github_project(&github, *count),
            _ => noop_path_project(*count),
        })
        .collect();
    let sync = |home: &IsolatedHome, full: bool| {
        let mut command = home.command(&bin(), None);
        command.args(["sync", "--quiet"]);
        if full {
            command.env("AGENTPACK_FULL_VERIFY", "1");
        }
        timed(&mut command)
    };
    // The steady state: a directory changed less than two seconds before a fast path looked at it
    // is not recorded (`RACY_SECONDS`), so wait, and let one no-op sync of each record them.
    std::thread::sleep(Duration::from_millis(3_500));
    for home in &homes {
        sync(home, false);
    }
    let runs = support::runs(31);
    let mut fast: Vec<Vec<Duration>> = kinds.iter().map(|_| Vec::new()).collect();
    let mut full: Vec<Vec<Duration>> = kinds.iter().map(|_| Vec::new()).collect();
    for round in 0..runs {
        for offset in 0..homes.len() {
            let index = (round + offset) % homes.len();
            fast[index].push(sync(&homes[index], false));
        }
    }
    for round in 0..runs.min(5) {
        for offset in 0..homes.len() {
            let index = (round + offset) % homes.len();
            full[index].push(sync(&homes[index], true));
        }
    }
    let fast: Vec<Duration> = fast.into_iter().map(median).collect();
    let full: Vec<Duration> = full.into_iter().map(median).collect();
    for (index, (kind, count)) in kinds.iter().enumerate() {
        let notes = if *count == 100 {
            format!(
                "**{:.2}x** the 10-package time (goal <= 1.3x, < 30 ms); `AGENTPACK_FULL_VERIFY=1`: {}",
                fast[index].as_secs_f64() / fast[index - 1].as_secs_f64(),
                ms(full[index])
            )
        } else {
            format!("`AGENTPACK_FULL_VERIFY=1`: {}", ms(full[index]))
        };
        rows.push((
            format!("no-op `sync`, {count} {kind} packages (fast path, {runs} runs interleaved)"),
            format!("{:.2} ms", fast[index].as_secs_f64() * 1000.0),
            notes,
        ));
    }
    if std::env::var_os("AGENTPACK_BENCH_KEEP").is_some() {
        for (home, (kind, count)) in homes.into_iter().zip(kinds) {
            println!(
                "kept: {count} {kind} packages: cd {} && env -i PATH=\"$PATH\" HOME={home} XDG_DATA_HOME={home}/.local/share XDG_CACHE_HOME={home}/.cache XDG_CONFIG_HOME={home}/.config GIT_CONFIG_NOSYSTEM=1 npm_config_registry=http://127.0.0.1:9/ AGENTPACK_HOME={} AGENTPACK_STAGING_ROOT={} AGENTPACK_GITHUB_API_URL=http://127.0.0.1:9 AGENTPACK_GITHUB_URL=http://127.0.0.1:9 NO_COLOR=1 {} sync --quiet",
                home.project.display(),
                home.agentpack_home.display(),
                home.staging_root.display(),
                bin().display(),
                home = home.home.display(),
            );
            std::mem::forget(home);
        }
    }
}

fn generation_benchmarks(rows: &mut Vec<(String, String, String)>) {
    let home = IsolatedHome::new();
    let plugin = home.project.parent().unwrap().join("marketplace-plugin");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name":"big","description":"1000 files"}"#,
    )
    .unwrap();
    for index in 0..250 {
        let skill = plugin.join(format!("skills/skill-{index:03}"));
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            format!(
                "---\nname: skill-{index:03}\ndescription: skill number {index}\n---\n\n{}",
                "Do the thing.\n".repeat(40)
            ),
        )
        .unwrap();
        std::fs::write(
            skill.join("reference.md"),
            format!("reference {index}\n").repeat(100),
        )
        .unwrap();
        std::fs::write(
            skill.join("scripts/run.sh"),
            format!("#!/bin/sh\necho {index}\n"),
        )
        .unwrap();
        std::fs::write(
            skill.join("scripts/data.json"),
            format!("{{\"index\": {index}}}\n"),
        )
        .unwrap();
    }
    write_manifest(
        &home.project,
        &[format!("big = {{ path = \"{}\" }}", plugin.display())],
        "",
    );
    run(&home, None, &home.project, &["lock", "--quiet"]);
    // Build the generation from a warm package store several times (a changing overlay forces a build).
    let mut builds = Vec::new();
    for round in 0..5 {
        std::fs::create_dir_all(home.project.join(".agents/rules")).unwrap();
        std::fs::write(
            home.project.join(".agents/rules/round.md"),
            format!("round {round}\n"),
        )
        .unwrap();
        builds.push(run(&home, None, &home.project, &["sync", "--quiet"]));
    }
    let build = median(builds);
    let generation = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
    let files = walk_files(&generation);
    let mut copies = Vec::new();
    for round in 0..5 {
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
    rows.push((
        format!("build a generation of a 1,000-file plugin for 6 agents ({files} staged files)"),
        ms(build),
        format!(
            "{:.2}x `cp -al` of the result ({}); goal within 2x",
            build.as_secs_f64() / copy.as_secs_f64(),
            ms(copy)
        ),
    ));
}

fn walk_files(dir: &Path) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            count += walk_files(&entry.path());
        } else {
            count += 1;
        }
    }
    count
}

fn dedup_benchmark(rows: &mut Vec<(String, String, String)>) {
    let home = IsolatedHome::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let deps = vec![
        format!(
            "hello = {{ path = \"{}\" }}",
            examples.join("hello-skill").display()
        ),
        format!(
            "review = {{ path = \"{}\" }}",
            examples.join("review-plugin").display()
        ),
    ];
    let modes = "\n[modes.lean]\nbase = \"none\"\nenable = [\"package:hello\"]\n\n[modes.review]\nbase = \"all\"\ndisable = [\"package:hello\"]\n";
    for index in 0..10 {
        let project = home.project.join(format!("p{index}"));
        write_manifest(&project, &deps, modes);
        let staging = home.staging_root.join(format!("p{index}"));
        for mode in ["default", "lean", "review"] {
            let output = home
                .command(&bin(), None)
                .current_dir(&project)
                .env("AGENTPACK_STAGING_ROOT", &staging)
                .args(["--quiet", "--mode", mode, "sync"])
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    let output = home
        .command(&bin(), None)
        .args(["store", "info", "--json"])
        .output()
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // Allocated bytes as `du` counts them (directories and metadata included) over the logical size
    // of the distinct files; bench/disk.sh measures the 20-package case the same way.
    let unique = info["unique_content_bytes"].as_u64().unwrap();
    let allocated = info["allocated"]["total"].as_u64().unwrap();
    rows.push((
        "10 projects x 3 modes of the same packages".into(),
        format!("{allocated} bytes allocated (du)"),
        format!(
            "{:.2}x the unique content bytes ({unique}); apparent {} bytes; dedup ratio {:.1}",
            allocated as f64 / unique as f64,
            info["apparent_bytes"],
            info["dedup_ratio"].as_f64().unwrap_or(0.0)
        ),
    ));
}

/// 20 one-by-one `add --no-sync` of packages of one repository at one commit (a repository of 20
/// skills and 400 other files) against one `lock` of the same 20 in a fresh home: downloads and time.
fn adds_benchmarks(rows: &mut Vec<(String, String, String)>) {
    let github = FakeGitHub::start();
    let repo = github.repo("bench", "mono");
    for p in 0..20 {
        repo.write(
            &format!("skills/s{p:02}/SKILL.md"),
            format!(
                "---\nname: s{p:02}\ndescription: skill {p}\n---\n\n{}\n",
                "Body line.\n".repeat(50)
            ),
        );
        repo.write(
            &format!("skills/s{p:02}/reference.md"),
            "reference\n".repeat(200),
        );
    }
    // Text that compresses like prose does (about 3:1), not like a repeated line.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for f in 0..400 {
        let mut page = format!("page {f}\n");
        for _ in 0..200 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            page.push_str(&format!("{state:016x} {}\n", state % 9973));
        }
        repo.write(&format!("docs/d{}/page{f}.md", f % 20), page);
    }
    let commit = repo.commit("mono");
    let specs: Vec<String> = (0..20)
        .map(|p| format!("bench/mono/skills/s{p:02}@{commit}"))
        .collect();

    let deps: Vec<String> = (0..20)
        .map(|p| format!("\"github.com/bench/mono/skills/s{p:02}\" = {{ commit = \"{commit}\" }}"))
        .collect();
    // Five rounds, each in fresh homes (a cold store): medians.
    let (mut lock_times, mut adds_times, mut firsts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lock_downloads, mut adds_downloads) = (0, 0);
    for _ in 0..5 {
        let one = IsolatedHome::new();
        write_manifest(&one.project, &deps, "");
        github.reset_counters();
        lock_times.push(run(&one, Some(&github), &one.project, &["lock", "--quiet"]));
        lock_downloads = github.total(Endpoint::Tarball) + github.total(Endpoint::GitHttp);

        let adds = IsolatedHome::new();
        write_manifest(&adds.project, &[], "");
        github.reset_counters();
        let mut total = Duration::ZERO;
        for (index, spec) in specs.iter().enumerate() {
            let took = run(
                &adds,
                Some(&github),
                &adds.project,
                &["add", spec, "--no-sync", "--quiet"],
            );
            if index == 0 {
                firsts.push(took);
            }
            total += took;
        }
        adds_times.push(total);
        adds_downloads = github.total(Endpoint::Tarball) + github.total(Endpoint::GitHttp);
    }
    let (lock_time, adds_time, first) = (median(lock_times), median(adds_times), median(firsts));
    // The same 20 adds with the snapshot removed before each (every add downloads, as before repo
    // snapshots were kept; each also pays for keeping it again).
    let uncached = IsolatedHome::new();
    write_manifest(&uncached.project, &[], "");
    github.reset_counters();
    let mut uncached_time = Duration::ZERO;
    for spec in &specs {
        remove_snapshots(&uncached.agentpack_home.join("cache"));
        uncached_time += run(
            &uncached,
            Some(&github),
            &uncached.project,
            &["add", spec, "--no-sync", "--quiet"],
        );
    }
    let uncached_downloads = github.total(Endpoint::Tarball) + github.total(Endpoint::GitHttp);
    rows.push((
        "one `lock` of 20 packages of one repository at one commit".into(),
        ms(lock_time),
        format!("{lock_downloads} archive download(s); median of 5 cold stores"),
    ));
    rows.push((
        "20 one-by-one `add --no-sync` of the same 20 packages".into(),
        ms(adds_time),
        format!(
            "{adds_downloads} archive download(s); {:.1}x the one `lock`; first add {}, the other 19 {} each on average (from the kept repo snapshot)",
            adds_time.as_secs_f64() / lock_time.as_secs_f64(),
            ms(first),
            ms((adds_time - first) / 19),
        ),
    ));
    rows.push((
        "the same 20 adds, the snapshot removed before each (as before it was kept)".into(),
        ms(uncached_time),
        format!(
            "{uncached_downloads} archive downloads; {:.1}x the adds from the kept snapshot",
            uncached_time.as_secs_f64() / adds_time.as_secs_f64()
        ),
    ));
}

/// Removes every repo snapshot store path below `cache` (sealed read-only: made writable first).
fn remove_snapshots(cache: &Path) {
    let Ok(store) = std::fs::read_dir(cache.join("store/v1")) else {
        return;
    };
    for entry in store.flatten() {
        if entry.file_name().to_string_lossy().contains("-snapshot-") {
            let status = Command::new("chmod")
                .arg("-R")
                .arg("u+w")
                .arg(entry.path())
                .status()
                .unwrap();
            assert!(status.success());
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench`-less args; only measure under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let mut rows = Vec::new();
    if std::env::var("AGENTPACK_BENCH_ONLY").as_deref() == Ok("adds") {
        adds_benchmarks(&mut rows);
        println!("| benchmark | result | notes |\n| --- | --- | --- |");
        for (name, result, notes) in rows {
            println!("| {name} | {result} | {notes} |");
        }
        return;
    }
    if std::env::var("AGENTPACK_BENCH_ONLY").as_deref() == Ok("noop-sync") {
        noop_sync_benchmarks(&mut rows);
        println!("| benchmark | result | notes |\n| --- | --- | --- |");
        for (name, result, notes) in rows {
            println!("| {name} | {result} | {notes} |");
        }
        return;
    }
    noop_sync_benchmarks(&mut rows);
    lock_benchmarks(&mut rows);
    generation_benchmarks(&mut rows);
    dedup_benchmark(&mut rows);
    adds_benchmarks(&mut rows);
    println!("| benchmark | result | notes |\n| --- | --- | --- |");
    for (name, result, notes) in rows {
        println!("| {name} | {result} | {notes} |");
    }
}
