//! Runs a probe's client processes concurrently (OpenCode's repeated `debug skill` samples and
//! its other listings, Claude Code's session beside `plugin validate` and `plugin details`,
//! Codex's two prompt inputs beside `--version`) with a bound on how many run at once, a per-call
//! timeout and a total deadline. Each process still runs in its own process group
//! ([`super::process::run`]); a job that could not start before the deadline is reported as
//! timed out, never as an empty listing.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::process::{self, Captured, ProcessError, Termination};

/// The test of a process's stdout so far that says it has printed what the probe needs (it is
/// then stopped, [`process::run`]).
pub type StopWhen = dyn Fn(&[u8]) -> bool + Sync;

/// One process to run: its command and, when it may stop early, its [`StopWhen`].
pub struct Job<'a> {
    pub command: Command,
    pub stop_when: Option<&'a StopWhen>,
}

impl Job<'_> {
    /// A job that runs to its end.
    pub fn to_end(command: Command) -> Self {
        Job {
            command,
            stop_when: None,
        }
    }
}

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

impl JobRun {
    /// What the job captured; one the deadline kept from starting is `timed_out` with no output
    /// (what it would have listed is unknown).
    pub fn captured(self) -> Result<Captured, ProcessError> {
        match self {
            JobRun::Ran(captured) => Ok(captured),
            JobRun::NotStarted => Ok(Captured {
                stdout: Vec::new(),
                stderr: b"agentpack probe: not started before the total timeout".to_vec(),
                termination: Termination {
                    how: "timed_out".to_owned(),
                    exit_code: None,
                    truncated: false,
                    elapsed_ms: 0,
                },
            }),
            JobRun::Failed(err) => Err(err),
        }
    }
}

/// How many client processes one probe runs at once: one per core, 2 to 8.
pub fn concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// Runs `jobs`, at most `bound` at a time, in order of the list; each gets the per-call
/// `timeout`, cut to what is left before `deadline`, and the capture bound `capture`. The
/// results are in job order.
pub fn run_bounded(
    jobs: Vec<Job<'_>>,
    bound: usize,
    timeout: Duration,
    deadline: Instant,
    capture: usize,
) -> Vec<JobRun> {
    let count = jobs.len();
    let next = AtomicUsize::new(0);
    let jobs: Vec<Mutex<Option<Job<'_>>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let results: Mutex<Vec<Option<JobRun>>> = Mutex::new((0..count).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..bound.clamp(1, count.max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(slot) = jobs.get(index) else { break };
                let Some(job) = slot.lock().ok().and_then(|mut job| job.take()) else {
                    continue;
                };
                let left = deadline.saturating_duration_since(Instant::now());
                let run = if left.is_zero() {
                    JobRun::NotStarted
                } else {
                    let stop_when = job.stop_when.unwrap_or(&|_| false);
                    match process::run(job.command, timeout.min(left), capture, stop_when) {
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

/// [`run_bounded`] with [`concurrency`], every run's capture in job order: an error only when a
/// process could not be started.
pub fn run_all(
    jobs: Vec<Job<'_>>,
    timeout: Duration,
    deadline: Instant,
    capture: usize,
) -> Result<Vec<Captured>, ProcessError> {
    run_bounded(jobs, concurrency(), timeout, deadline, capture)
        .into_iter()
        .map(JobRun::captured)
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
        let job = || {
            let mut command = Command::new("sh");
            command.arg("-c").arg(format!(
                "echo + >> {0}; sleep 0.2; echo - >> {0}; echo out",
                log.display()
            ));
            Job::to_end(command)
        };
        let jobs = |n: usize| (0..n).map(|_| job()).collect::<Vec<_>>();
        let far = Instant::now() + Duration::from_secs(60);
        let runs = run_bounded(jobs(6), 2, Duration::from_secs(30), far, 1024);
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
        let runs = run_bounded(jobs(3), 2, Duration::from_secs(30), Instant::now(), 1024);
        assert!(runs.iter().all(|r| matches!(r, JobRun::NotStarted)));
        // The per-call timeout is cut to the deadline.
        let mut slow = Command::new("sleep");
        slow.arg("30");
        let soon = Instant::now() + Duration::from_millis(300);
        let runs = run_bounded(
            vec![Job::to_end(slow)],
            1,
            Duration::from_secs(30),
            soon,
            1024,
        );
        assert!(matches!(&runs[0], JobRun::Ran(c) if c.termination.how == "timed_out"));
    }
}
