//! OpenCode's probe runs: `--version`, a first `debug skill` listing and, when the staged tree
//! holds agents or commands, `debug config` (and `agent list` when it holds agents), all at
//! once; then, only when OpenCode has a choice between same-named skills ([`super::candidates`]), more `debug skill` samples (its choice
//! varies from run to run): [`OPENCODE_SKILL_SAMPLES`] in all, or
//! `AGENTPACK_PROBE_OPENCODE_SAMPLES`. At most a bounded number run at once
//! ([`super::sampling`]), each within the per-call timeout and all within the total, with a
//! disposable home and `OPENCODE_CONFIG_DIR` a regular-file copy of the staged OpenCode tree
//! (controlled projection, outside the checkout). Concurrent runs never share a database: each
//! has its own data, cache and state directories.

use agentpack_harness::Agent;
use anyhow::Result;

use super::candidates::{self, Places};
use super::parse::{self, Catalog, ParseFailure};
use super::sampling::{self, Job};
use super::{copy_regular, process, staged_artifacts, Observed, ProbeEnv, CAPTURE_BOUND};
use crate::env::{self, EnvVars};
use crate::evidence::catalog::Sampling;

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
    let staged = staged_artifacts(Agent::OpenCode, setup.staged);
    let agents: Vec<&str> = staged
        .iter()
        .filter(|(category, _)| category == "agent")
        .map(|(_, name)| name.as_str())
        .collect();
    // What does not depend on the version runs beside `--version`: the first listing, the
    // resolved configuration and each staged agent.
    // The resolved configuration only when the staged tree could appear in it: with no staged
    // agent or command, nothing of the package's is listed there (and what other places
    // configure stays unknown, as anything a bounded scope does not list).
    let configured = staged
        .iter()
        .any(|(category, _)| category == "agent" || category == "command")
        || candidates::staged_config_naming(&config_dir, &["\"agent\"", "\"command\""]).is_some();
    let mut listings: Vec<Vec<&str>> = vec![vec!["debug", "skill"]];
    if configured {
        listings.push(vec!["debug", "config"]);
        // One `agent list` confirms every staged agent (one `debug agent NAME` each would cost
        // a process per agent).
        if !agents.is_empty() {
            listings.push(vec!["agent", "list"]);
        }
    }
    let mut jobs = vec![Job::to_end(run_in(0, &["--version"]))];
    jobs.extend(
        listings
            .iter()
            .enumerate()
            .map(|(i, args)| Job::to_end(run_in(i + 1, args))),
    );
    let mut runs = sampling::run_all(jobs, setup.timeout, setup.deadline, CAPTURE_BOUND)?;
    let version_run = runs.remove(0);
    let version = parse::version_of(&String::from_utf8_lossy(&version_run.stdout));
    let observed = |captured, parsed, sampling| Observed {
        scope: "controlled_projection",
        version: version.clone(),
        captured,
        parsed,
        sampling,
    };
    if !version_run.exited_zero() || version_run.cut_short() {
        let failure = ParseFailure::Malformed("`opencode --version` did not exit 0".to_owned());
        return Ok(observed(version_run, Err(failure), None));
    }
    let Some(v) = version.clone().filter(|v| v == parse::OPENCODE_VALIDATED) else {
        let first = runs.remove(0);
        let parsed = match &version {
            Some(v) => parse::opencode_skills(&first.stdout, v, &config_dir),
            None => Err(ParseFailure::Malformed(
                "`opencode --version` printed no version".to_owned(),
            )),
        };
        return Ok(observed(first, parsed, None));
    };
    // One listing is the complete answer unless OpenCode has a choice between same-named
    // skills; then the rest of the samples, at once.
    let first = &runs[0];
    let listed = parse::opencode_skill_locations(&first.stdout, &v);
    let decided = match &listed {
        Ok(listed) if first.exited_zero() && !first.cut_short() => {
            let places = Places {
                config_dir: config_dir.clone(),
                cwd: setup.outside.clone(),
                home: setup.home.clone(),
            };
            Some(candidates::choice(&places, listed))
        }
        // A first listing that failed decides the receipt: nothing more is asked.
        _ => None,
    };
    let taken = match &decided {
        Some(choice) if choice.repeated => samples,
        _ => 1,
    };
    let more = (1..taken)
        .map(|k| Job::to_end(run_in(listings.len() + k, &["debug", "skill"])))
        .collect();
    let extra = sampling::run_all(more, setup.timeout, setup.deadline, CAPTURE_BOUND)?;
    // The samples first, then the configuration and the agents.
    let mut all = vec![runs.remove(0)];
    all.extend(extra);
    all.extend(runs);
    let mut args: Vec<&[&str]> = vec![&["debug", "skill"]; taken];
    args.extend(listings[1..].iter().map(Vec::as_slice));
    let (captured, parsed) = combine(
        &all,
        &args,
        taken,
        configured.then_some(Configured {
            staged: &staged,
            agents: &agents,
        }),
        &config_dir,
        &v,
    );
    let sampling = decided.map(|choice| Sampling {
        samples: taken,
        reason: choice.reason,
    });
    Ok(observed(captured, parsed, sampling))
}

/// How many times a probe lists OpenCode's skills (`debug skill`) by default when OpenCode has
/// a choice between same-named skills: its choice varies from run to run, so every winner seen
/// over the samples is recorded. `AGENTPACK_PROBE_OPENCODE_SAMPLES` sets another number (tests
/// take fewer); with no choice one listing is the complete answer.
pub const OPENCODE_SKILL_SAMPLES: usize = 60;

/// The number of `debug skill` samples taken when OpenCode has a choice
/// (`AGENTPACK_PROBE_OPENCODE_SAMPLES`, default [`OPENCODE_SKILL_SAMPLES`]).
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

/// What the staged tree holds that OpenCode's resolved configuration lists: every staged
/// `(category, name)`, and the staged agents' names.
#[derive(Clone, Copy)]
struct Configured<'a> {
    staged: &'a [(String, String)],
    agents: &'a [&'a str],
}

/// One evidence stream and one termination for all of OpenCode's runs (`all`, run with `args`:
/// the `samples` listings, then, when `configured`, the configuration and,
/// with staged agents, `agent list`), and the catalog: the merged samples plus the agents and
/// commands the resolved configuration lists (a staged agent is the package's only when `agent
/// list` lists it too). The termination is the first run's that
/// did not end well (`timed_out` first: a sample that did not finish makes the winners unknown,
/// never guessed).
fn combine(
    all: &[process::Captured],
    args: &[&[&str]],
    samples: usize,
    configured: Option<Configured<'_>>,
    config_dir: &std::path::Path,
    version: &str,
) -> (process::Captured, Result<Catalog, ParseFailure>) {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    for (run, args) in all.iter().zip(args) {
        let header = format!("== opencode {}\n", args.join(" "));
        stdout.extend_from_slice(header.as_bytes());
        stdout.extend_from_slice(&run.stdout);
        stderr.extend_from_slice(header.as_bytes());
        stderr.extend_from_slice(&run.stderr);
    }
    let ended_well =
        |t: &process::Termination| t.how == "exited" && t.exit_code == Some(0) && !t.truncated;
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
        let Some(Configured { staged, agents }) = configured else {
            return Ok(catalog);
        };
        let mut configured = parse::opencode_config(&all[samples].stdout, version, staged)?;
        if let Some(run) = all.get(samples + 1).filter(|_| !agents.is_empty()) {
            // A staged agent `agent list` does not list is not observed, whatever the
            // configuration lists.
            let resolved = parse::opencode_agent_list(&run.stdout)?;
            configured.retain(|o| {
                !(o.category == "agent"
                    && agents.contains(&o.name.as_str())
                    && !resolved.contains(&o.name))
            });
        }
        catalog.artifacts.extend(configured);
        Ok(catalog)
    })();
    (
        process::Captured {
            stdout,
            stderr,
            termination,
        },
        parsed,
    )
}
