//! Building a generation of 100 plugins for six agents against `cp -al` of the result, both sides
//! interleaved in one run (run with `bench/generation-build.sh`, i.e.
//! `cargo bench -p agentpack-cli --bench generation_build -- --bench`).
//!
//! The data is `fetch_build`'s marketplace shape: 10 repositories on the local fake GitHub, 10
//! plugins each (a manifest, 3 skills with a reference file, 2 commands, 1 agent). A project locks
//! and syncs them once; then each round changes an overlay file (a new generation: `sync` verifies
//! the 100 packages, renders and publishes) and, right after, `cp -al` copies that generation.
//! Also reported: what the generations allocate (`du` of the generation store paths, inodes).
//!
//! `AGENTPACK_BENCH_KEEP=1` keeps the home and writes `env.sh` there (the variables a sync of
//! this project needs), for profiling one build by hand (`strace -c -f`, `perf`, callgrind).
//! Ratios in one run, medians; nothing here is asserted.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use agentpack_test_support::{FakeGitHub, IsolatedHome};

mod support;
use support::{bin, median, ms, runs, timed};

const REPOS: usize = 10;
const PLUGINS: usize = 10;

/// The repositories of the marketplace; returns the `[dependencies]` lines.
fn marketplace(github: &FakeGitHub) -> Vec<String> {
    let mut deps = Vec::new();
    for r in 0..REPOS {
        let name = format!("market{r}");
        let repo = github.repo("bench", &name);
        for p in 0..PLUGINS {
            let (_dir, dependency) = support::write_market_plugin(&repo, &name, r, p);
            deps.push(dependency);
        }
        repo.write("README.md", "A marketplace.\n");
        repo.commit("plugins");
        repo.tag("v1.0.0");
    }
    deps
}

/// Files (symbolic links included) and directories under `dir`, links not followed.
fn count(dir: &Path) -> (usize, usize) {
    let (mut files, mut dirs) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            let (f, d) = count(&entry.path());
            files += f;
            dirs += d + 1;
        } else {
            files += 1;
        }
    }
    (files, dirs)
}

fn du(path: &Path) -> u64 {
    let out = Command::new("du")
        .args(["-s", "--block-size=1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let runs = runs(5);
    let github = FakeGitHub::start();
    let deps = marketplace(&github);
    let home = IsolatedHome::new();
    let mut manifest = String::from("name = \"bench\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
    for dep in &deps {
        manifest.push_str(dep);
        manifest.push('\n');
    }
    std::fs::write(home.project.join("agentpack.toml"), manifest).unwrap();
    timed(
        home.command(&bin(), Some(&github))
            .args(["sync", "--quiet"]),
    );
    std::fs::create_dir_all(home.project.join(".agents/rules")).unwrap();

    let (mut builds, mut copies) = (Vec::new(), Vec::new());
    let mut generation = None;
    for round in 0..runs {
        std::fs::write(
            home.project.join(".agents/rules/round.md"),
            format!("round {round}\n"),
        )
        .unwrap();
        builds.push(timed(home.command(&bin(), None).args([
            "sync",
            "--quiet",
            "--no-progress",
        ])));
        let built = std::fs::canonicalize(home.staging_root.join("modes/default")).unwrap();
        let target = home.home.join(format!("cp-al-{round}"));
        let start = Instant::now();
        let status = Command::new("cp")
            .arg("-al")
            .arg(&built)
            .arg(&target)
            .status()
            .unwrap();
        copies.push(start.elapsed());
        assert!(status.success());
        generation = Some(built);
    }
    let generation = generation.unwrap();
    let (files, dirs) = count(&generation);
    let (build, copy) = (median(builds), median(copies));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("| benchmark | result | notes |\n| --- | --- | --- |");
    println!(
        "| build a generation of the 100 plugins for 6 agents ({files} files and links, {dirs} directories) | {} | **{:.2}x** `cp -al` of the result ({}) |",
        ms(build),
        build.as_secs_f64() / copy.as_secs_f64(),
        ms(copy)
    );
    println!(
        "| `du` of one generation store path | {} bytes | |",
        du(&generation)
    );
    println!(
        "\nload average at the end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    if std::env::var_os("AGENTPACK_BENCH_KEEP").is_some() {
        let mut env = String::new();
        for (key, value) in home.command(&bin(), None).get_envs() {
            if let Some(value) = value {
                env.push_str(&format!(
                    "export {}='{}'\n",
                    key.to_string_lossy(),
                    value.to_string_lossy()
                ));
            }
        }
        env.push_str(&format!("cd '{}'\n", home.project.display()));
        let file = home.home.join("env.sh");
        std::fs::write(&file, env).unwrap();
        println!("kept: source {}", file.display());
        std::mem::forget(home);
    }
}
