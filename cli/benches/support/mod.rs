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
