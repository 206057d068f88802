//! `agentpack probe --agent claude|codex|opencode`: runs the real client against what the mode's
//! generation staged and writes a receipt of what the client itself lists.
//!
//! This module owns what every probe shares: the staged tree and identities, the client's digest,
//! the time limits, the disposable directories ([`ProbeEnv`]), the status and the receipt. The
//! runs of each client are in [`claude`] (workspace session, then the bundle's `plugin validate`
//! and `plugin details`), [`codex`] (controlled projection, then the workspace session) and
//! [`opencode`] (controlled projection, sampled); [`all`] probes every installed agent at once
//! (`probe --all`, `sync --probe`). It never stages (a missing staged tree is an error naming
//! `agentpack sync`), never makes a model request, never reads the user's own agent configuration
//! (the client's HOME is a disposable directory), and takes no project lock. Every receipt is bound
//! to a policy (`--policy`, `local` when not given) and records the agent's capability revision.
//!
//! Exit codes: 0 the probe observed a catalog, 4 the client's version is not one the parser was
//! validated on, 5 the client failed, hung or printed something the parser does not read.

pub mod all;
mod candidates;
mod claude;
mod codex;
pub mod details;
pub mod diff;
mod opencode;
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
    let program = env::agent_binary(agent)?;
    let timeout = Duration::from_secs(
        positive_secs(EnvVars::AGENTPACK_PROBE_TIMEOUT_SECS, 30)?.unwrap_or(DEFAULT_TIMEOUT_SECS),
    );
    let total = positive_secs(EnvVars::AGENTPACK_PROBE_TOTAL_TIMEOUT_SECS, 300)?.map_or(
        Duration::from_secs(DEFAULT_TOTAL_TIMEOUT_SECS).max(timeout),
        Duration::from_secs,
    );
    let samples = opencode::samples()?;
    let scratch = tempfile::Builder::new()
        .prefix("agentpack-probe-")
        .tempdir()
        .context("cannot create the probe's disposable home")?;
    let setup = ProbeEnv {
        program: &program,
        staged: &staged,
        workspace: &project.workspace,
        scratch: scratch.path(),
        home: scratch.path().join("home"),
        // A controlled projection runs outside the checkout, in an empty directory.
        outside: scratch.path().join("work"),
        timeout,
        deadline: std::time::Instant::now() + total,
    };
    fs_err::create_dir_all(&setup.home)?;
    fs_err::create_dir_all(&setup.outside)?;
    let Some(adapter) = parse::adapter(agent) else {
        anyhow::bail!("`{agent}` cannot be probed (claude, codex, opencode)")
    };
    // The executable is hashed (never run for the digest: the bytes the probe runs) while the
    // client runs: Claude Code's is hundreds of megabytes.
    let (sha256, observed) = std::thread::scope(|scope| {
        let hashing = scope.spawn(|| executable_digest(&program));
        let observed = match adapter.client {
            parse::Client::ClaudeInit => claude::observe(&setup),
            parse::Client::CodexPromptInput => codex::observe(&setup),
            parse::Client::OpenCodeDebug => opencode::observe(&setup, samples),
        };
        let sha256 = hashing
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("hashing {} failed", program.display())));
        (sha256, observed)
    });
    let (sha256, observed) = (sha256?, observed?);
    let Observed {
        scope,
        version,
        captured,
        parsed,
        sampling,
    } = observed;
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
        sampling,
        evidence_digest: receipt::digest(&evidence),
    };
    let path = receipt::write(&project.state_dir().join(receipt::DIR), &receipt, &evidence)?;
    Ok(Probe {
        receipt,
        path,
        expected: staged_artifacts(agent, &staged),
    })
}

/// What every run of one probe shares: the client, the staged tree, the disposable directories
/// (never the user's own configuration) and the time limits.
pub(super) struct ProbeEnv<'a> {
    program: &'a Path,
    staged: &'a Path,
    workspace: &'a Path,
    /// The probe's temporary directory (`TMPDIR` of every run, the copies of the staged trees).
    scratch: &'a Path,
    /// The client's `HOME`.
    home: PathBuf,
    /// An empty directory outside the checkout: where a controlled projection runs.
    outside: PathBuf,
    /// Per call.
    timeout: Duration,
    /// For all the calls.
    deadline: std::time::Instant,
}

impl ProbeEnv<'_> {
    /// The client in `cwd` with an emptied environment: `PATH`, and `HOME` and `TMPDIR` in the
    /// disposable directory.
    fn command(&self, cwd: &Path) -> Command {
        let mut command = Command::new(self.program);
        command
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("TMPDIR", self.scratch);
        command
    }
}

/// What one client's runs observed: the scope of the catalog, the version the client printed,
/// every run's output and termination, and the parsed catalog.
pub(super) struct Observed {
    scope: &'static str,
    version: Option<String>,
    captured: process::Captured,
    parsed: Result<Catalog, ParseFailure>,
    /// How many listings were taken and why (OpenCode).
    sampling: Option<crate::evidence::catalog::Sampling>,
}

/// The whole number of seconds above 0 that `var` sets, if set (`example` is the fix's number).
fn positive_secs(var: &str, example: u64) -> Result<Option<u64>> {
    env::var(var)
        .map(|text| {
            text.trim().parse().ok().filter(|secs| *secs > 0).ok_or_else(|| {
                anyhow::anyhow!(
                    "{var} is `{text}`, not a whole number of seconds above 0\n  fix  set it to a number such as {example}, or unset it"
                )
            })
        })
        .transpose()
}

fn validated(agent: Agent) -> &'static str {
    parse::adapter(agent).map_or("none", |adapter| adapter.validated)
}

/// `sha256:<hex>` of the executable's bytes (read, never run).
fn executable_digest(program: &Path) -> Result<String> {
    let mut digest = Sha256::new();
    std::io::copy(&mut fs_err::File::open(program)?, &mut digest)
        .with_context(|| format!("cannot read {}", program.display()))?;
    Ok(format!("sha256:{}", hex::encode(digest.finalize())))
}

/// The default total time a probe's sampled runs may take (each run also has the per-call
/// timeout); a run that cannot finish within it makes the receipt `timed_out`.
pub const DEFAULT_TOTAL_TIMEOUT_SECS: u64 = 600;

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
            let (name, scope, status) = (&property.name, &property.scope, &property.status);
            let reason = property.reason.as_deref().map(|r| format!(" ({r})"));
            let reason = reason.unwrap_or_default();
            out.push_str(&format!("  {name} ({scope}): {status}{reason}\n"));
        }
        for hook in &catalog.hooks {
            let (event, name, outcome) = (&hook.event, &hook.name, &hook.outcome);
            let exit = hook.exit_code.map_or("?".to_owned(), |c| c.to_string());
            out.push_str(&format!("  hook {event} {name}: {outcome} (exit {exit})\n"));
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
