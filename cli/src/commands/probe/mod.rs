//! `agentpack probe --agent claude|codex|opencode`: runs the real client against what the mode's
//! generation staged and writes a receipt of what the client itself lists.
//!
//! OpenCode: `debug skill` sampled [`OPENCODE_SKILL_SAMPLES`] times (or
//! `AGENTPACK_PROBE_OPENCODE_SAMPLES`), `debug config` and `debug agent NAME` per staged agent,
//! a bounded number at once ([`sampling`]), each within the per-call timeout and all within the
//! total, with a disposable home and `OPENCODE_CONFIG_DIR` a regular-file copy of the staged
//! OpenCode tree (controlled projection, outside the checkout). [`all`] probes every installed
//! agent at once (`probe --all`, `sync --probe`). Claude Code: the print-mode `init` event of a
//! session started in the checkout (workspace session), with the staged bundle as `--plugin-dir`,
//! a dummy key and `ANTHROPIC_BASE_URL` at a closed port on 127.0.0.1, stopped as soon as the init
//! event is read; then `plugin validate --json` and `plugin details` of the bundle ([`details`];
//! controlled projection, the catalog's `other_scopes` and `properties`). Codex: `debug
//! prompt-input` with [`CODEX_SETTINGS`] and a disposable `HOME`/`CODEX_HOME` holding a
//! regular-file copy of the staged Codex home, outside the checkout (controlled projection), then
//! the same in the checkout (workspace session, `other_scopes`). It never stages (a missing staged
//! tree is an error naming `agentpack sync`), never makes a model request, never reads the user's
//! own agent configuration (the client's HOME is a disposable directory), and takes no project
//! lock. Every receipt is bound to a policy (`--policy`, `local` when not given) and records the
//! agent's capability revision.
//!
//! Exit codes: 0 the probe observed a catalog, 4 the client's version is not one the parser was
//! validated on, 5 the client failed, hung or printed something the parser does not read.

pub mod all;
pub mod details;
pub mod diff;
pub mod parse;
pub mod process;
pub mod sampling;
pub mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, SystemTime};

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_harness::Agent;
use anyhow::{Context as _, Result};
use clap::Args;
use sha2::{Digest as _, Sha256};

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::evidence::identity::{self, current_identities};
use crate::output;
use crate::project::Project;

use crate::evidence::receipt::{self, Client, Receipt};
use parse::{Catalog, ParseFailure};

/// The capture bound of each stream.
pub const CAPTURE_BOUND: usize = 4 * 1024 * 1024;
/// The default timeout of one client process.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The agent to probe (the mode is the global `--mode`).
    #[arg(long, value_parser = PROBED_NAMES, required_unless_present = "all")]
    pub agent: Option<String>,
    /// Probe every installed supported agent (claude, codex, opencode) in parallel and print one
    /// table; each probe writes its receipt.
    #[arg(long, conflicts_with = "agent")]
    pub all: bool,
    /// Bind the receipt to this policy (with the global `--strict-external` and the bytes of
    /// contract.json beside the definition): only a preflight under the same policy attaches it.
    #[arg(long, value_enum)]
    pub policy: Option<crate::evidence::policy::Policy>,
}

pub fn run(ctx: &Context, args: &ProbeArgs) -> Result<ExitCode> {
    if args.all {
        let probed = all::probe_all(ctx, args.policy)?;
        all::print(ctx, &probed)?;
        return Ok(all::exit_code(&probed));
    }
    let name = args.agent.as_deref().unwrap_or_default();
    let agent = Agent::from_name(name)
        .filter(|a| PROBED.contains(a))
        .ok_or_else(|| anyhow::anyhow!("`{name}` cannot be probed (claude, codex, opencode)"))?;
    let Probe { receipt, path, .. } = probe_agent(ctx, agent, args.policy)?;
    if ctx.json {
        let mut value = serde_json::to_value(&receipt)?;
        value["path"] = serde_json::Value::String(path.display().to_string());
        output::json(&value)?;
    } else {
        output::stdout(&human(&receipt, &path))?;
    }
    Ok(ExitCode::from(status_exit(&receipt.status)))
}

/// The agents a probe can observe.
pub const PROBED: [Agent; 3] = [Agent::Claude, Agent::Codex, Agent::OpenCode];

/// Their names, as `--agent` and receipts spell them.
pub const PROBED_NAMES: [&str; 3] = ["claude", "codex", "opencode"];

/// The exit code of a probe that ended with `status`.
fn status_exit(status: &str) -> u8 {
    match status {
        "complete" => 0,
        "unknown" => 4,
        _ => 5,
    }
}

/// The executable a probe of `agent` runs, found like the launchers find it (its `*_PATH`
/// override, then `PATH`).
pub(crate) fn client_program(
    agent: Agent,
) -> Result<PathBuf, agentpack_harness::launch::command::LaunchError> {
    agentpack_harness::launch::command::resolve_binary(
        agent,
        std::env::var_os(agentpack_harness::launch::command::path_override_var(agent)).as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
}

/// One probe's receipt, where it was written, and the artifacts of the staged tree the client
/// could list in the probe's scope (`(category, name)`).
#[derive(Debug)]
pub struct Probe {
    pub receipt: Receipt,
    pub path: PathBuf,
    pub expected: Vec<(String, String)>,
}

/// The skills (and for Claude Code and OpenCode the commands and agents) the staged tree holds
/// for `agent`: what its probe can list.
fn staged_artifacts(agent: Agent, staged: &Path) -> Vec<(String, String)> {
    let root = staged.join(agent.profile().staged_root);
    let names = |dir: &str, markdown_files: bool| -> Vec<String> {
        let mut names: Vec<String> = fs_err::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                if markdown_files {
                    name.strip_suffix(".md").map(str::to_owned)
                } else {
                    entry.path().join("SKILL.md").is_file().then_some(name)
                }
            })
            .collect();
        names.sort();
        names
    };
    let mut expected: Vec<(String, String)> = names("skills", false)
        .into_iter()
        .map(|n| ("skill".to_owned(), n))
        .collect();
    if parse::adapter(agent).is_some_and(|a| a.lists_commands_and_agents) {
        expected.extend(
            names("commands", true)
                .into_iter()
                .map(|n| ("command".to_owned(), n)),
        );
        expected.extend(
            names("agents", true)
                .into_iter()
                .map(|n| ("agent".to_owned(), n)),
        );
    }
    expected
}

/// Probes `agent` against the current mode's staged tree and writes the receipt: the receipt and
/// where it was written. An error only when nothing could be run or written (no project, nothing
/// staged, no client); a client that fails is a receipt with that status.
pub fn probe_agent(
    ctx: &Context,
    agent: Agent,
    policy: Option<crate::evidence::policy::Policy>,
) -> Result<Probe> {
    let project = Project::discover(ctx)?;
    let manifest_bytes = agentpack_lockfile::read_regular_file(&project.manifest_path)
        .with_context(|| format!("cannot read {}", project.manifest_path.display()))?;
    let lock_bytes = match agentpack_lockfile::read_regular_file(&project.lock_path) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => {
            return Err(anyhow::Error::new(err)
                .context(format!("cannot read {}", project.lock_path.display())));
        }
    };
    let manifest = project.load_manifest()?;
    let mode = crate::pipeline::resolve_mode(ctx, &manifest)?;
    let Some(staged) = ModePointer::new(&project.staging_root, &mode.dir)
        .current()
        .filter(|target| target.is_dir())
    else {
        anyhow::bail!(
            "mode `{}` has no staged tree in {}: a probe observes what was staged and never stages\n  fix  run `agentpack sync` first",
            mode.name,
            project.staging_root.display()
        );
    };
    let mut identities = current_identities(
        &project,
        &manifest_bytes,
        lock_bytes.as_deref(),
        &mode.name,
        Some(&staged),
    );
    // A probe without `--policy` is bound to the default policy (`local`): a receipt fits only the
    // policy, strictness and contract it was made under.
    {
        let policy = policy.unwrap_or(crate::evidence::policy::Policy::Local);
        let contract = project.root.join(crate::evidence::policy::CONTRACT_FILE);
        let contract_bytes = match agentpack_lockfile::read_regular_file(&contract) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                return Err(
                    anyhow::Error::new(err).context(format!("cannot read {}", contract.display()))
                );
            }
        };
        identities.policy = Some(identity::policy_digest(
            policy.as_str(),
            ctx.strict_external,
            contract_bytes.as_deref(),
        ));
    }
    let program = client_program(agent)?;
    // Hashed, never run for the digest: the bytes the probe then runs.
    let sha256 = {
        let mut digest = Sha256::new();
        std::io::copy(&mut fs_err::File::open(&program)?, &mut digest)?;
        format!("sha256:{}", hex::encode(digest.finalize()))
    };
    let timeout = Duration::from_secs(match env::var(EnvVars::AGENTPACK_PROBE_TIMEOUT_SECS) {
        None => DEFAULT_TIMEOUT_SECS,
        Some(text) => text.trim().parse().ok().filter(|secs| *secs > 0).ok_or_else(|| {
            anyhow::anyhow!(
                "{} is `{text}`, not a whole number of seconds above 0\n  fix  set it to a number such as 30, or unset it",
                EnvVars::AGENTPACK_PROBE_TIMEOUT_SECS
            )
        })?,
    });
    let total = match env::var(EnvVars::AGENTPACK_PROBE_TOTAL_TIMEOUT_SECS) {
        None => Duration::from_secs(DEFAULT_TOTAL_TIMEOUT_SECS).max(timeout),
        Some(text) => Duration::from_secs(text.trim().parse().ok().filter(|secs| *secs > 0).ok_or_else(|| {
            anyhow::anyhow!(
                "{} is `{text}`, not a whole number of seconds above 0\n  fix  set it to a number such as 300, or unset it",
                EnvVars::AGENTPACK_PROBE_TOTAL_TIMEOUT_SECS
            )
        })?),
    };
    let deadline = std::time::Instant::now() + total;
    let samples = opencode_samples()?;
    let scratch = tempfile::Builder::new()
        .prefix("agentpack-probe-")
        .tempdir()
        .context("cannot create the probe's disposable home")?;
    let home = scratch.path().join("home");
    fs_err::create_dir_all(&home)?;
    // A controlled projection runs outside the checkout, in an empty directory.
    let outside = scratch.path().join("work");
    fs_err::create_dir_all(&outside)?;

    let base = |program: &Path, cwd: &Path| {
        let mut command = Command::new(program);
        command
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("TMPDIR", scratch.path());
        command
    };
    let Some(adapter) = parse::adapter(agent) else {
        anyhow::bail!("`{agent}` cannot be probed (claude, codex, opencode)")
    };
    let (scope, version, captured, parsed) = match adapter.client {
        parse::Client::ClaudeInit => {
            let bundle = agentpack_harness::launch::command::claude_bundle(&staged);
            let mut command = base(&program, &project.workspace);
            command
                .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
                .arg("--plugin-dir")
                .arg(&bundle);
            // The settings a launch passes, so the session is the one a launch starts.
            if let Some(settings) = fs_err::read_to_string(bundle.join("agentpack-settings.json"))
                .ok()
                .as_deref()
                .and_then(agentpack_harness::launch::command::inline_settings)
            {
                command.arg("--settings").arg(settings);
            }
            command
                .env("ANTHROPIC_API_KEY", "sk-ant-agentpack-probe")
                .env(
                    "ANTHROPIC_BASE_URL",
                    format!("http://127.0.0.1:{}", closed_port()?),
                )
                .env("DISABLE_AUTOUPDATER", "1")
                .env("DISABLE_TELEMETRY", "1");
            let mut captured = process::run(command, timeout, CAPTURE_BOUND, &init_seen)?;
            let mut parsed = parse::claude_init(&captured.stdout);
            let version = first_init(&captured.stdout);
            // The controlled projection beside the session: `plugin validate` of the bundle,
            // outside the checkout; its output joins the retained evidence.
            if let Ok(catalog) = &mut parsed {
                let mut validate = base(&program, &outside);
                validate.args(["plugin", "validate", "--json"]).arg(&bundle);
                let run = process::run(validate, timeout, CAPTURE_BOUND, &|_| false)?;
                captured
                    .stdout
                    .extend_from_slice(b"\n== claude plugin validate --json\n");
                captured.stdout.extend_from_slice(&run.stdout);
                captured.stderr.extend_from_slice(&run.stderr);
                if run.termination.how == "timed_out" || run.termination.truncated {
                    captured.termination = run.termination;
                } else {
                    match parse::claude_validate(&run.stdout) {
                        Ok(observed) => {
                            let mut command = base(&program, &outside);
                            command
                                .arg("--plugin-dir")
                                .arg(&bundle)
                                .args(["plugin", "details", details::BUNDLE])
                                .env(
                                    "ANTHROPIC_BASE_URL",
                                    format!("http://127.0.0.1:{}", closed_port()?),
                                )
                                .env("DISABLE_AUTOUPDATER", "1")
                                .env("DISABLE_TELEMETRY", "1");
                            let run = process::run(command, timeout, CAPTURE_BOUND, &|_| false)?;
                            captured
                                .stdout
                                .extend_from_slice(b"\n== claude plugin details\n");
                            captured.stdout.extend_from_slice(&run.stdout);
                            captured.stderr.extend_from_slice(&run.stderr);
                            if run.termination.how == "timed_out" || run.termination.truncated {
                                captured.termination = run.termination;
                            } else {
                                match details::observe(observed, &run) {
                                    Ok((other_scopes, property)) => {
                                        catalog.other_scopes = other_scopes;
                                        catalog.properties.push(property);
                                    }
                                    Err(failure) => parsed = Err(failure),
                                }
                            }
                        }
                        Err(failure) => parsed = Err(failure),
                    }
                }
            }
            ("workspace_session", version, captured, parsed)
        }
        parse::Client::CodexPromptInput => {
            // Two regular-file copies of the staged home: the controlled projection's and the
            // workspace session's (each run may write into its own).
            let projection_home = scratch.path().join("codex-home");
            copy_regular(&staged.join("codex-home"), &projection_home)?;
            let session_home = scratch.path().join("codex-session-home");
            copy_regular(&staged.join("codex-home"), &session_home)?;
            let in_dir = |cwd: &Path, codex_home: &Path, args: &[&str]| {
                let mut command = base(&program, cwd);
                command.args(args).env("CODEX_HOME", codex_home);
                command
            };
            // `debug prompt-input` takes the settings itself (`--version` is run bare).
            let mut prompt_input = vec!["debug", "prompt-input"];
            for setting in CODEX_SETTINGS {
                prompt_input.extend(["-c", setting]);
            }
            prompt_input.push("hi");
            let (version, mut captured) = versioned(
                &|args| in_dir(&outside, &projection_home, args),
                &prompt_input,
                timeout,
            )?;
            let mut parsed = match &version {
                Some(v) => parse::codex_prompt_input(
                    &captured.stdout,
                    v,
                    &projection_home.join("skills"),
                    "controlled_projection",
                ),
                None => Err(ParseFailure::Malformed(
                    "`codex --version` printed no version".to_owned(),
                )),
            };
            // The workspace session: the same in the checkout, so the skills the checkout
            // provides compete with the package's; its winners join `other_scopes`.
            if let (Ok(catalog), Some(v)) = (&mut parsed, &version) {
                let command = in_dir(&project.workspace, &session_home, &prompt_input);
                let run = process::run(command, timeout, CAPTURE_BOUND, &|_| false)?;
                captured
                    .stdout
                    .extend_from_slice(b"\n== codex debug prompt-input (workspace session)\n");
                captured.stdout.extend_from_slice(&run.stdout);
                captured.stderr.extend_from_slice(&run.stderr);
                let ended_well =
                    run.termination.how == "exited" && run.termination.exit_code == Some(0);
                if !ended_well || run.termination.truncated {
                    captured.termination = run.termination;
                } else {
                    match parse::codex_prompt_input(
                        &run.stdout,
                        v,
                        &session_home.join("skills"),
                        "workspace_session",
                    ) {
                        Ok(session) => catalog.other_scopes = session.artifacts,
                        Err(failure) => parsed = Err(failure),
                    }
                }
            }
            ("controlled_projection", version, captured, parsed)
        }
        parse::Client::OpenCodeDebug => {
            let config_dir = scratch.path().join("opencode");
            copy_regular(&staged.join("opencode"), &config_dir)?;
            // Each run its own data, cache and state (concurrent runs never share a database).
            let run_in = |run: usize, args: &[&str]| {
                let own = scratch.path().join(format!("opencode-run-{run}"));
                let mut command = base(&program, &outside);
                command
                    .args(args)
                    .env("OPENCODE_CONFIG_DIR", &config_dir)
                    .env("XDG_CONFIG_HOME", home.join(".config"))
                    .env("XDG_DATA_HOME", own.join("share"))
                    .env("XDG_CACHE_HOME", own.join("cache"))
                    .env("XDG_STATE_HOME", own.join("state"));
                command
            };
            let (version, first) =
                versioned(&|args| run_in(0, args), &["debug", "skill"], timeout)?;
            let first_ok =
                first.termination.how == "exited" && first.termination.exit_code == Some(0);
            match &version {
                Some(v) if first_ok && v == parse::OPENCODE_VALIDATED => {
                    let staged_here = staged_artifacts(Agent::OpenCode, &staged);
                    let (captured, parsed) = opencode_listings(
                        &run_in,
                        first,
                        &staged_here,
                        &config_dir,
                        v,
                        Sampling {
                            samples,
                            timeout,
                            deadline,
                        },
                    )?;
                    ("controlled_projection", version, captured, parsed)
                }
                Some(v) => {
                    let parsed = parse::opencode_skills(&first.stdout, v, &config_dir);
                    ("controlled_projection", version, first, parsed)
                }
                None => (
                    "controlled_projection",
                    version,
                    first,
                    Err(ParseFailure::Malformed(
                        "`opencode --version` printed no version".to_owned(),
                    )),
                ),
            }
        }
    };
    let term = &captured.termination;
    let process_ok = match term.how.as_str() {
        "stopped" => true,
        "exited" => term.exit_code == Some(0),
        _ => false,
    };
    let (status, reason, catalog): (&str, Option<String>, Option<Catalog>) = if term.how
        == "timed_out"
    {
        (
                "timed_out",
                Some(format!(
                    "a client process ran past the {}s per-call timeout or the {}s total and was killed with its process group: what it would have listed is unknown, nothing is guessed",
                    timeout.as_secs(),
                    total.as_secs()
                )),
                None,
            )
    } else if term.truncated {
        (
            "failed",
            Some(format!(
                "the output went beyond the {CAPTURE_BOUND}-byte capture bound"
            )),
            None,
        )
    } else {
        match parsed {
            Err(ParseFailure::UnknownVersion(v)) => (
                "unknown",
                Some(format!(
                    "{} {} is not a version this probe was validated on ({}): nothing is guessed",
                    agent.display_name(),
                    if v.is_empty() { "(no version)" } else { &v },
                    validated(agent)
                )),
                None,
            ),
            Ok(_) if !process_ok => (
                "failed",
                Some(format!("the client exited with {:?}", term.exit_code)),
                None,
            ),
            Ok(catalog) => ("complete", None, Some(catalog)),
            Err(ParseFailure::Malformed(why)) => (
                "failed",
                Some(match term.exit_code {
                    Some(code) if code != 0 => format!("the client exited with {code}: {why}"),
                    _ => why,
                }),
                None,
            ),
        }
    };
    let now = SystemTime::now();
    let evidence = receipt::evidence_bytes(&captured.stdout, &captured.stderr);
    let receipt = Receipt {
        format: receipt::FORMAT,
        id: receipt::new_id(now, agent.as_str()),
        agent: agent.as_str().to_owned(),
        created: humantime::format_rfc3339_seconds(now).to_string(),
        identities,
        client: Client {
            path: program,
            sha256,
            version,
        },
        scope: scope.to_owned(),
        termination: captured.termination.clone(),
        status: status.to_owned(),
        reason,
        catalog,
        adapter: parse::adapter_revision(agent.as_str()).to_owned(),
        capability: adapter.capability,
        evidence_digest: receipt::digest(&evidence),
    };
    let path = receipt::write(&project.state_dir().join(receipt::DIR), &receipt, &evidence)?;
    Ok(Probe {
        receipt,
        path,
        expected: staged_artifacts(agent, &staged),
    })
}

fn validated(agent: Agent) -> &'static str {
    parse::adapter(agent).map_or("none", |adapter| adapter.validated)
}

/// `--version`, then (when that exited 0) the catalog command `args`: the version printed and
/// what the catalog command captured (or the version run's capture when it failed).
fn versioned(
    command: &dyn Fn(&[&str]) -> Command,
    args: &[&str],
    timeout: Duration,
) -> Result<(Option<String>, process::Captured)> {
    let version_run = process::run(command(&["--version"]), timeout, 64 * 1024, &|_| false)?;
    let version = parse::version_of(&String::from_utf8_lossy(&version_run.stdout));
    let ok =
        version_run.termination.how == "exited" && version_run.termination.exit_code == Some(0);
    if !ok {
        return Ok((version, version_run));
    }
    Ok((
        version,
        process::run(command(args), timeout, CAPTURE_BOUND, &|_| false)?,
    ))
}

/// How many times a probe lists OpenCode's skills (`debug skill`) by default: its choice between
/// same-named skills varies from run to run, so every winner seen over the samples is recorded.
/// `AGENTPACK_PROBE_OPENCODE_SAMPLES` sets another number (tests take fewer).
pub const OPENCODE_SKILL_SAMPLES: usize = 60;

/// How many OpenCode processes run at once: one per core, from 2 to 8 (each `debug skill` run
/// is about a second of CPU; more at once than cores only makes each run slower and nearer its
/// per-call timeout).
fn opencode_concurrency() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// The default total time a probe's sampled runs may take (each run also has the per-call
/// timeout); a run that cannot finish within it makes the receipt `timed_out`.
pub const DEFAULT_TOTAL_TIMEOUT_SECS: u64 = 600;

/// The settings every Codex run of a probe passes (`-c`): cloud skills off (only the files the
/// probe placed are listed) and file credential stores (never the user's keyring). Codex 0.171.0
/// parses each of them: it rejects a wrong type or value naming the key.
pub const CODEX_SETTINGS: [&str; 3] = [
    "cloud.skills.enabled=false",
    "cli_auth_credentials_store=\"file\"",
    "mcp_oauth_credentials_store=\"file\"",
];

/// The number of `debug skill` samples (`AGENTPACK_PROBE_OPENCODE_SAMPLES`, default
/// [`OPENCODE_SKILL_SAMPLES`]).
fn opencode_samples() -> Result<usize> {
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
/// [`opencode_concurrency`] at once, each within the per-call timeout and all before the
/// deadline. The evidence is every run's output in order; the termination the first run's that
/// did not end well (`timed_out` when one ran past its timeout or could not start before the
/// deadline: a sample that did not finish makes the winners unknown, never guessed); the catalog
/// the merged samples plus the agents and commands the resolved configuration lists (a staged
/// agent is the package's only when `debug agent` resolves it too).
fn opencode_listings(
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
        opencode_concurrency(),
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

/// Whether the stream holds a complete `init` line.
fn init_seen(stdout: &[u8]) -> bool {
    stdout
        .split(|b| *b == b'\n')
        .rev()
        .skip(1) // the last piece has no newline yet
        .any(|line| {
            let marker = b"\"subtype\":\"init\"";
            line.windows(marker.len()).any(|w| w == marker)
        })
}

/// The `claude_code_version` of the first init event, if any.
fn first_init(stdout: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stdout).lines().find_map(|line| {
        let event: serde_json::Value = serde_json::from_str(line).ok()?;
        (event["subtype"] == "init")
            .then(|| event["claude_code_version"].as_str().map(str::to_owned))
            .flatten()
    })
}

/// A port on 127.0.0.1 nothing listens on (bound, read, released).
fn closed_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .context("cannot find a closed port on 127.0.0.1 for the probe")?;
    Ok(listener.local_addr()?.port())
}

/// Copies `from` into `to` as regular files and directories (links followed), so the client can
/// write beside them and never into the store.
fn copy_regular(from: &Path, to: &Path) -> Result<()> {
    fs_err::create_dir_all(to)?;
    if !from.is_dir() {
        return Ok(());
    }
    for entry in fs_err::read_dir(from)? {
        let entry = entry?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        if fs_err::metadata(&source)?.is_dir() {
            copy_regular(&source, &target)?;
        } else {
            fs_err::copy(&source, &target)?;
            let mut permissions = fs_err::metadata(&target)?.permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            permissions.set_readonly(false);
            fs_err::set_permissions(&target, permissions)?;
        }
    }
    Ok(())
}

fn human(receipt: &Receipt, path: &Path) -> String {
    let mut out = format!(
        "probe {} ({} {}, {}): {}\n",
        receipt.agent,
        receipt.client.path.display(),
        receipt.client.version.as_deref().unwrap_or("(no version)"),
        receipt.scope,
        receipt.status
    );
    if let Some(reason) = &receipt.reason {
        out.push_str(&format!("  {reason}\n"));
    }
    if let Some(catalog) = &receipt.catalog {
        let ours: Vec<String> = catalog
            .artifacts
            .iter()
            .filter(|a| a.winner == "package")
            .map(|a| format!("{}:{}", a.category, a.name))
            .collect();
        out.push_str(&format!(
            "  observed {} artifact(s), {} from the staged tree: {}\n",
            catalog.artifacts.len(),
            ours.len(),
            ours.join(", ")
        ));
        if let Some(scope) = catalog.other_scopes.first().map(|a| a.scope.as_str()) {
            let ours = catalog
                .other_scopes
                .iter()
                .filter(|a| a.winner == "package")
                .count();
            out.push_str(&format!(
                "  {scope}: {} artifact(s), {ours} from the staged tree\n",
                catalog.other_scopes.len()
            ));
        }
        for property in &catalog.properties {
            out.push_str(&format!(
                "  {} ({}): {}{}\n",
                property.name,
                property.scope,
                property.status,
                property
                    .reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ));
        }
        for hook in &catalog.hooks {
            out.push_str(&format!(
                "  hook {} {}: {} (exit {})\n",
                hook.event,
                hook.name,
                hook.outcome,
                hook.exit_code.map_or("?".to_owned(), |c| c.to_string())
            ));
        }
    }
    out.push_str(&format!("  receipt {}\n", path.display()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probed_agents_are_those_with_an_adapter() {
        let with: Vec<Agent> = Agent::ALL
            .into_iter()
            .filter(|agent| parse::adapter(*agent).is_some())
            .collect();
        let mut probed = PROBED.to_vec();
        probed.sort();
        assert_eq!(with, probed);
        assert_eq!(PROBED.map(Agent::as_str), PROBED_NAMES);
    }
}
