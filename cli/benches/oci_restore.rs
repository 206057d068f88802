//! Restoring a lock on fresh machines: from an OCI substituter vs from GitHub tarballs (run with
//! `bench/oci_restore.sh`, i.e. `cargo bench -p agentpack-cli --bench oci_restore -- --bench`).
//!
//! One machine locks and syncs 50 packages from 5 repositories of the local fake GitHub and pushes
//! their store paths to a real OCI registry (Debian's `docker-registry` on 127.0.0.1). Then 10 fresh
//! homes each `sync` the same lock from GitHub, and 10 more with `AGENTPACK_SUBSTITUTERS` naming the
//! registry. Requests to the fake GitHub are counted (the goal with the substituter: none) and the
//! median restore times compared. Prints a Markdown table; `docs/src/benchmarks.md` records a run.
//! Performance is measured here, never asserted in tests.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use agentpack_builders::oci::{
    identity_tag, ArtifactConfig, ArtifactKind, OciClient, OciTransport,
};
use agentpack_lockfile::Lockfile;
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

/// Pushes every locked package's store path under the tag of its content hash (what
/// `agentpack store push` does for a project).
fn push_lock(home: &IsolatedHome, registry: &TestRegistry, repository: &str) -> usize {
    let client = OciClient::new(OciTransport::from_env(&|_| None)).unwrap();
    let target = registry.repository_url(repository).parse().unwrap();
    let lock = Lockfile::load(&home.project.join("pack.lock")).unwrap();
    for package in &lock.packages {
        let hash = package.content_hash.clone().unwrap();
        let slot = std::fs::canonicalize(
            home.agentpack_home
                .join("cache")
                .join(package.cache_key.as_str()),
        )
        .unwrap();
        client
            .push_tree(
                &target,
                &identity_tag(hash.as_str()),
                &slot,
                &ArtifactConfig {
                    kind: ArtifactKind::Package,
                    module: package.module.to_string(),
                    commit: Some(package.commit.to_string()),
                    content_identity: hash.to_string(),
                    executables: Vec::new(),
                    agentpack_version: env!("CARGO_PKG_VERSION").to_owned(),
                },
            )
            .unwrap();
    }
    lock.packages.len()
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

    github.reset_counters();
    let from_github: Vec<Duration> = (0..HOMES)
        .map(|_| {
            let home = IsolatedHome::new();
            copy_project(&origin.project, &home.project);
            sync(&home, Some(&github), None)
        })
        .collect();
    let github_requests = github.requests().len();

    github.reset_counters();
    let from_registry: Vec<Duration> = (0..HOMES)
        .map(|_| {
            let home = IsolatedHome::new();
            copy_project(&origin.project, &home.project);
            sync(&home, Some(&github), Some(&substituters))
        })
        .collect();
    let registry_requests = github.requests().len();

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
        "| substituter / GitHub time | {:.2}x | |",
        registry_median.as_secs_f64() / github_median.as_secs_f64()
    );
}
