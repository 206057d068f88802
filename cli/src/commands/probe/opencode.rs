//! OpenCode's probe runs: `debug skill` sampled [`OPENCODE_SKILL_SAMPLES`] times (or
//! `AGENTPACK_PROBE_OPENCODE_SAMPLES`), `debug config` and `debug agent NAME` per staged agent, a
//! bounded number at once ([`super::sampling`]), each within the per-call timeout and all within
//! the total, with a disposable home and `OPENCODE_CONFIG_DIR` a regular-file copy of the staged
//! OpenCode tree (controlled projection, outside the checkout). Concurrent runs never share a
//! database: each has its own data, cache and state directories.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agentpack_harness::Agent;
use anyhow::Result;

use super::parse::{self, Catalog, ParseFailure};
use super::{
    copy_regular, process, sampling, staged_artifacts, versioned, Observed, ProbeEnv, CAPTURE_BOUND,
};
use crate::env::{self, EnvVars};

pub(super) fn observe(setup: &ProbeEnv<'_>, samples: usize) -> Result<Observed> {
    let config_dir = setup.scratch.join("opencode");
    copy_regular(
        &setup.staged.join(Agent::OpenCode.profile().staged_root),
        &config_dir,
    )?;
    // Each run its own data, cache and state (concurrent runs never share a database).
    let run_in = |run: usize, args: &[&str]| {
        let own = setup.scratch.join(format!("opencode-run-{run}"));
        let mut command = setup.command(&setup.outside);
        command
            .args(args)
            .env("OPENCODE_CONFIG_DIR", &config_dir)
            .env("XDG_CONFIG_HOME", setup.home.join(".config"))
            .env("XDG_DATA_HOME", own.join("share"))
            .env("XDG_CACHE_HOME", own.join("cache"))
            .env("XDG_STATE_HOME", own.join("state"));
        command
    };
    let (version, first) = versioned(&|args| run_in(0, args), &["debug", "skill"], setup.timeout)?;
    let (captured, parsed) = match &version {
        Some(v) if first.exited_zero() && v == parse::OPENCODE_VALIDATED => {
            let staged_here = staged_artifacts(Agent::OpenCode, setup.staged);
            listings(
                &run_in,
                first,
                &staged_here,
                &config_dir,
                v,
                Sampling {
                    samples,
                    timeout: setup.timeout,
                    deadline: setup.deadline,
                },
            )?
        }
        Some(v) => {
            let parsed = parse::opencode_skills(&first.stdout, v, &config_dir);
            (first, parsed)
        }
        None => (
            first,
            Err(ParseFailure::Malformed(
                "`opencode --version` printed no version".to_owned(),
            )),
        ),
    };
    Ok(Observed {
        scope: "controlled_projection",
        version,
        captured,
        parsed,
    })
}

/// How many times a probe lists OpenCode's skills (`debug skill`) by default: its choice between
/// same-named skills varies from run to run, so every winner seen over the samples is recorded.
/// `AGENTPACK_PROBE_OPENCODE_SAMPLES` sets another number (tests take fewer).
pub const OPENCODE_SKILL_SAMPLES: usize = 60;

/// How many OpenCode processes run at once: one per core, from 2 to 8 (each `debug skill` run
/// is about a second of CPU; more at once than cores only makes each run slower and nearer its
/// per-call timeout).
fn concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// The number of `debug skill` samples (`AGENTPACK_PROBE_OPENCODE_SAMPLES`, default
/// [`OPENCODE_SKILL_SAMPLES`]).
pub(super) fn samples() -> Result<usize> {
    match env::var(EnvVars::AGENTPACK_PROBE_OPENCODE_SAMPLES) {
        None => Ok(OPENCODE_SKILL_SAMPLES),
        Some(text) => text.trim().parse().ok().filter(|n| (1..=1000).contains(n)).ok_or_else(|| {
            anyhow::anyhow!(
                "{} is `{text}`, not a whole number from 1 to 1000\n  fix  set it to a number such as 60, or unset it",
                EnvVars::AGENTPACK_PROBE_OPENCODE_SAMPLES
            )
        }),
    }
}

/// How OpenCode's listings are sampled.
#[derive(Debug, Clone, Copy)]
struct Sampling {
    samples: usize,
    /// Per call.
    timeout: Duration,
    /// For all of them.
    deadline: std::time::Instant,
}

/// The rest of OpenCode's controlled projection after the first `debug skill` sample `first`:
/// the other samples, `debug config` and `debug agent NAME` for each staged agent, at most
/// [`concurrency`] at once, each within the per-call timeout and all before the
/// deadline. The evidence is every run's output in order; the termination the first run's that
/// did not end well (`timed_out` when one ran past its timeout or could not start before the
/// deadline: a sample that did not finish makes the winners unknown, never guessed); the catalog
/// the merged samples plus the agents and commands the resolved configuration lists (a staged
/// agent is the package's only when `debug agent` resolves it too).
fn listings(
    run_in: &(dyn Fn(usize, &[&str]) -> Command + Sync),
    first: process::Captured,
    staged: &[(String, String)],
    config_dir: &Path,
    version: &str,
    sampling: Sampling,
) -> Result<(process::Captured, Result<Catalog, ParseFailure>)> {
    let samples = sampling.samples;
    let agents: Vec<&str> = staged
        .iter()
        .filter(|(category, _)| category == "agent")
        .map(|(_, name)| name.as_str())
        .collect();
    let mut jobs: Vec<Vec<&str>> = (1..samples).map(|_| vec!["debug", "skill"]).collect();
    jobs.push(vec!["debug", "config"]);
    for name in &agents {
        jobs.push(vec!["debug", "agent", name]);
    }
    let runs = sampling::run_bounded(
        jobs.len(),
        &|i| run_in(i + 1, &jobs[i]),
        concurrency(),
        sampling.timeout,
        sampling.deadline,
        CAPTURE_BOUND,
    );
    let mut all = vec![first];
    for run in runs {
        match run {
            sampling::JobRun::Ran(captured) => all.push(captured),
            sampling::JobRun::NotStarted => {
                all.push(process::Captured {
                    stdout: Vec::new(),
                    stderr: b"agentpack probe: not started before the total timeout".to_vec(),
                    termination: process::Termination {
                        how: "timed_out".to_owned(),
                        exit_code: None,
                        truncated: false,
                        elapsed_ms: 0,
                    },
                });
            }
            sampling::JobRun::Failed(err) => return Err(err.into()),
        }
    }
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    for (run, args) in all
        .iter()
        .zip(std::iter::once(&vec!["debug", "skill"]).chain(&jobs))
    {
        let header = format!("== opencode {}\n", args.join(" "));
        stdout.extend_from_slice(header.as_bytes());
        stdout.extend_from_slice(&run.stdout);
        stderr.extend_from_slice(header.as_bytes());
        stderr.extend_from_slice(&run.stderr);
    }
    let ended_well =
        |t: &process::Termination| t.how == "exited" && t.exit_code == Some(0) && !t.truncated;
    // A run that timed out decides the termination before any other failure: its listing is
    // unknown.
    let mut termination = all
        .iter()
        .map(|r| &r.termination)
        .find(|t| t.how == "timed_out")
        .or_else(|| all.iter().map(|r| &r.termination).find(|t| !ended_well(t)))
        .unwrap_or(&all[0].termination)
        .clone();
    termination.truncated = all.iter().any(|r| r.termination.truncated);
    termination.elapsed_ms = all
        .iter()
        .map(|r| r.termination.elapsed_ms)
        .max()
        .unwrap_or(0);
    let parsed = (|| {
        let listed: Vec<Catalog> = all[..samples]
            .iter()
            .map(|r| parse::opencode_skills(&r.stdout, version, config_dir))
            .collect::<Result<_, _>>()?;
        let mut catalog = parse::merge_skill_samples(&listed);
        let mut configured = parse::opencode_config(&all[samples].stdout, version, staged)?;
        for (run, name) in all[samples + 1..].iter().zip(&agents) {
            // A staged agent `debug agent` cannot resolve is not observed, whatever the
            // configuration lists.
            if !parse::opencode_agent_resolved(&run.stdout, name)? {
                configured.retain(|o| !(o.category == "agent" && o.name == *name));
            }
        }
        catalog.artifacts.extend(configured);
        Ok(catalog)
    })();
    Ok((
        process::Captured {
            stdout,
            stderr,
            termination,
        },
        parsed,
    ))
}
