//! Runs many client processes (OpenCode's repeated `debug skill` samples and its other listings)
//! concurrently with a bound on how many run at once, a per-call timeout and a total deadline.
//! Each process still runs in its own process group ([`super::process::run`]); a job that could
//! not start before the deadline is reported as not run, never as an empty listing.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::process::{self, Captured, ProcessError};

/// How one job ended.
#[derive(Debug)]
pub enum JobRun {
    /// It ran (its termination says whether it finished in time).
    Ran(Captured),
    /// The total deadline passed before it could start.
    NotStarted,
    /// It could not be started.
    Failed(ProcessError),
}

/// Runs `jobs` (each a command built by `command(index)`), at most `bound` at a time; each gets
/// the per-call `timeout`, cut to what is left before `deadline`. The results are in job order.
pub fn run_bounded(
    jobs: usize,
    command: &(dyn Fn(usize) -> Command + Sync),
    bound: usize,
    timeout: Duration,
    deadline: Instant,
    capture: usize,
) -> Vec<JobRun> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<JobRun>>> = Mutex::new((0..jobs).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..bound.clamp(1, jobs.max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                if index >= jobs {
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let run = if left.is_zero() {
                    JobRun::NotStarted
                } else {
                    match process::run(command(index), timeout.min(left), capture, &|_| false) {
                        Ok(captured) => JobRun::Ran(captured),
                        Err(err) => JobRun::Failed(err),
                    }
                };
                if let Ok(mut results) = results.lock() {
                    results[index] = Some(run);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|run| run.unwrap_or(JobRun::NotStarted))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_and_the_deadline_stops_what_has_not_started() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        // Each job appends "+" when it starts and "-" when it ends: never more than 2 open.
        let job = |_: usize| {
            let mut command = Command::new("sh");
            command.arg("-c").arg(format!(
                "echo + >> {0}; sleep 0.2; echo - >> {0}; echo out",
                log.display()
            ));
            command
        };
        let far = Instant::now() + Duration::from_secs(60);
        let runs = run_bounded(6, &job, 2, Duration::from_secs(30), far, 1024);
        assert_eq!(runs.len(), 6);
        assert!(runs
            .iter()
            .all(|r| matches!(r, JobRun::Ran(c) if c.stdout == b"out\n")));
        let mut open = 0i32;
        for line in std::fs::read_to_string(&log).unwrap().lines() {
            open += if line == "+" { 1 } else { -1 };
            assert!(open <= 2, "more than 2 jobs ran at once");
        }
        // A deadline already passed: nothing starts.
        let runs = run_bounded(3, &job, 2, Duration::from_secs(30), Instant::now(), 1024);
        assert!(runs.iter().all(|r| matches!(r, JobRun::NotStarted)));
        // The per-call timeout is cut to the deadline.
        let slow = |_: usize| {
            let mut command = Command::new("sleep");
            command.arg("30");
            command
        };
        let soon = Instant::now() + Duration::from_millis(300);
        let runs = run_bounded(1, &slow, 1, Duration::from_secs(30), soon, 1024);
        assert!(matches!(&runs[0], JobRun::Ran(c) if c.termination.how == "timed_out"));
    }
}
