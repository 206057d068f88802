//! What the benchmarks of agentpack-cli share: the binary under test, the number of runs, timing one
//! run that must succeed, and medians. A directory module, so cargo does not take it for a benchmark.
//! Timing only: nothing here asserts performance.
#![allow(dead_code)] // each benchmark uses a part

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The `agentpack` binary cargo built for the benchmark.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentpack"))
}

/// `AGENTPACK_BENCH_RUNS`, else `default`.
pub fn runs(default: usize) -> usize {
    std::env::var("AGENTPACK_BENCH_RUNS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

/// Runs `command`, which must succeed (its stderr is the panic message otherwise); returns the wall
/// time and the output.
pub fn timed_output(command: &mut Command) -> (Duration, Output) {
    let start = Instant::now();
    let output = command.output().unwrap();
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (elapsed, output)
}

/// [`timed_output`] without the output.
pub fn timed(command: &mut Command) -> Duration {
    timed_output(command).0
}

/// The middle sample.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `duration` in milliseconds, one decimal.
pub fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

/// Writes plugin `p` of marketplace `r` into `repo` the way the 100-plugin benchmarks shape it
/// (a manifest, three skills with a reference each, two commands, one agent) and returns its
/// directory and its `[dependencies]` line.
pub fn write_market_plugin(
    repo: &agentpack_test_support::TestRepo,
    market: &str,
    r: usize,
    p: usize,
) -> (String, String) {
    let dir = format!("plugins/p{p}");
    repo.write(
        &format!("{dir}/.claude-plugin/plugin.json"),
        format!(r#"{{"name":"m{r}-p{p}","version":"1.0.0","description":"plugin {p} of marketplace {r}"}}"#),
    );
    for s in 0..3 {
        repo.write(
            &format!("{dir}/skills/s{s}/SKILL.md"),
            format!(
                "---\nname: m{r}-p{p}-s{s}\ndescription: skill {s} of plugin {p}\n---\n\n{}",
                "Follow the steps.\n".repeat(30)
            ),
        );
        repo.write(
            &format!("{dir}/skills/s{s}/reference.md"),
            format!("reference {r} {p} {s}\n").repeat(80),
        );
    }
    for c in 0..2 {
        repo.write(
            &format!("{dir}/commands/c{c}.md"),
            format!("---\ndescription: command {c}\n---\nRun command {c} of m{r}-p{p}.\n"),
        );
    }
    repo.write(
        &format!("{dir}/agents/reviewer.md"),
        format!("---\nname: m{r}-p{p}-reviewer\ndescription: reviews\n---\nReview.\n"),
    );
    let dependency = format!("\"github.com/bench/{market}/{dir}\" = \"^1.0\"");
    (dir, dependency)
}

/// Writes `count` one-file path packages (`<dir>/pkgNNN/SKILL.md`, the shape the launch and no-op
/// sync benchmarks share) and returns their `[dependencies]` lines.
pub fn write_skill_packages(dir: &std::path::Path, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let package = dir.join(format!("pkg{i:03}"));
            std::fs::create_dir_all(&package).unwrap();
            std::fs::write(
                package.join("SKILL.md"),
                format!(
                    "---\nname: pkg{i:03}\ndescription: bench skill {i}\n---\n\n{}",
                    "Body line.\n".repeat(20)
                ),
            )
            .unwrap();
            format!("pkg{i:03} = {{ path = {:?} }}", package.to_str().unwrap())
        })
        .collect()
}
