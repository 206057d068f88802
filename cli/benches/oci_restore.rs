//! Restoring a lock on fresh machines: from an OCI substituter vs from GitHub tarballs (run with
//! `bench/oci_restore.sh`, i.e. `cargo bench -p agentpack-cli --bench oci_restore -- --bench`).
//!
//! One machine locks and syncs 50 packages from 5 repositories of the local fake GitHub and pushes
//! their store paths to a real OCI registry (Debian's `docker-registry` on 127.0.0.1) with
//! `agentpack store push`. Then 10 rounds, each restoring one fresh home by `sync` from GitHub and
//! one with `AGENTPACK_SUBSTITUTERS` naming the registry (interleaved, so both see the same load).
//! Requests to the fake GitHub are counted (the goal with the substituter: none) and the median
//! restore times compared, with the load average before and after. Prints a Markdown table; `docs/src/benchmarks.md` records a run.
//! Performance is measured here, never asserted in tests.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use agentpack_test_support::{FakeGitHub, IsolatedHome, TestRegistry};

mod support;
use support::{bin, median, ms, timed};

const HOMES: usize = 10;

fn sync(home: &IsolatedHome, github: Option<&FakeGitHub>, substituters: Option<&str>) -> Duration {
    let mut command = home.command(&bin(), github);
    if let Some(list) = substituters {
        command.env("AGENTPACK_SUBSTITUTERS", list);
    }
    timed(command.args(["sync", "--quiet"]))
}

fn copy_project(from: &Path, to: &Path) {
    for file in ["agentpack.toml", "pack.lock"] {
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
}

/// `agentpack store push` of the origin's project: every locked package's store path, tagged by
/// its content hash. Returns how many were pushed.
fn push_lock(home: &IsolatedHome, registry: &TestRegistry, repository: &str) -> usize {
    let output = home
        .command(&bin(), None)
        .args([
            "store",
            "push",
            &registry.repository_url(repository),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let pushed = report["pushed"].as_u64().unwrap_or(0);
    usize::try_from(pushed).unwrap_or(usize::MAX)
}

/// The 1-minute load average (`/proc/loadavg`), for the record beside the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`; only measure under `cargo bench`.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let github = FakeGitHub::start();
    let mut manifest = String::from("name = \"bench\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
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
            manifest.push_str(&format!(
                "\"github.com/bench/repo{r}/skills/s{p}\" = {{}}\n"
            ));
        }
        repo.commit("skills");
    }
    let origin = IsolatedHome::new();
    std::fs::write(origin.project.join("agentpack.toml"), &manifest).unwrap();
    let output = origin
        .command(&bin(), Some(&github))
        .args(["sync", "--quiet"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let registry = TestRegistry::start();
    let packages = push_lock(&origin, &registry, "bench/cache");
    let substituters = registry.repository_url("bench/cache");

    // Interleaved: each round restores one fresh home from GitHub, then one from the registry, so
    // both sides see the same load.
    let load_before = load_average();
    let mut from_github = Vec::new();
    let mut from_registry = Vec::new();
    let (mut github_requests, mut registry_requests) = (0, 0);
    for _ in 0..HOMES {
        github.reset_counters();
        let home = IsolatedHome::new();
        copy_project(&origin.project, &home.project);
        from_github.push(sync(&home, Some(&github), None));
        github_requests += github.requests().len();

        github.reset_counters();
        let home = IsolatedHome::new();
        copy_project(&origin.project, &home.project);
        from_registry.push(sync(&home, Some(&github), Some(&substituters)));
        registry_requests += github.requests().len();
    }
    let load_after = load_average();

    let github_median = median(from_github);
    let registry_median = median(from_registry);
    println!("| benchmark | result | notes |\n| --- | --- | --- |");
    println!(
        "| {HOMES} fresh homes `sync` a {packages}-package lock from GitHub tarballs | median {} | {github_requests} requests to the fake GitHub |",
        ms(github_median)
    );
    println!(
        "| {HOMES} fresh homes `sync` it from an OCI substituter | median {} | {registry_requests} requests to the fake GitHub |",
        ms(registry_median)
    );
    println!(
        "| substituter / GitHub time | {:.2}x | load average {load_before} before, {load_after} after |",
        registry_median.as_secs_f64() / github_median.as_secs_f64()
    );
}
