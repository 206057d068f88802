//! `agentpack probe --agent claude|codex|opencode`: runs the real client against what the mode's
//! generation staged and writes a receipt of what the client itself lists.
//!
//! OpenCode: `debug skill` with a disposable home and `OPENCODE_CONFIG_DIR` a regular-file copy of
//! the staged OpenCode tree (controlled projection, outside the checkout; Codex likewise).
//! Claude Code: the print-mode `init` event of a session started in the checkout (workspace
//! session), with the staged bundle as `--plugin-dir`, a dummy key and `ANTHROPIC_BASE_URL` at a
//! closed port on 127.0.0.1, stopped as soon as the init event is read. Codex: `debug
//! prompt-input` with a disposable `HOME`/`CODEX_HOME` holding a regular-file copy of the staged
//! Codex home (controlled projection). It never stages (a missing staged tree is an error naming
//! `agentpack sync`), never makes a model request, never reads the user's own agent configuration
//! (the client's HOME is a disposable directory), and takes no project lock.
//!
//! Exit codes: 0 the probe observed a catalog, 4 the client's version is not one the parser was
//! validated on, 5 the client failed, hung or printed something the parser does not read.

pub mod parse;
pub mod process;
pub mod receipt;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, SystemTime};

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_harness::Agent;
use anyhow::{Context as _, Result};
use clap::Args;
use sha2::{Digest as _, Sha256};

use crate::commands::preflight::identity;
use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::project::Project;

use parse::{Catalog, ParseFailure};
use receipt::{BoundIdentities, Client, Receipt};

/// The capture bound of each stream.
pub const CAPTURE_BOUND: usize = 4 * 1024 * 1024;
/// The default timeout of one client process.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The agent to probe (the mode is the global `--mode`).
    #[arg(long, value_parser = ["claude", "codex", "opencode"])]
    pub agent: String,
    /// Bind the receipt to this policy (with the global `--strict-external` and the bytes of
    /// contract.json beside the definition): only a preflight under the same policy attaches it.
    #[arg(long, value_enum)]
    pub policy: Option<crate::commands::preflight::Policy>,
}

/// The identities of the current inputs, as preflight computes them.
pub(crate) fn current_identities(
    project: &Project,
    manifest_bytes: &[u8],
    lock_bytes: Option<&[u8]>,
    mode: &str,
    staged: Option<&Path>,
) -> BoundIdentities {
    let home = env::var(EnvVars::HOME).map(PathBuf::from);
    let config_home = env::var(EnvVars::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let places =
        identity::fingerprint_places(&project.workspace, home.as_deref(), config_home.as_deref());
    let staged_generation =
        staged.and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()));
    let cache_dir = project.home.root.join("cache");
    BoundIdentities {
        source: identity::source_identity(manifest_bytes, lock_bytes),
        lock: identity::lock_identity(lock_bytes),
        mode: mode.to_owned(),
        workspace_inputs: identity::workspace_input_digest(&places).ok(),
        generation: staged_generation
            .as_deref()
            .and_then(|name| identity::generation_digest(name, &cache_dir)),
        staged_generation,
        policy: None,
    }
}

pub fn run(ctx: &Context, args: &ProbeArgs) -> Result<ExitCode> {
    let agent = Agent::from_name(&args.agent)
        .filter(|a| matches!(a, Agent::Claude | Agent::Codex | Agent::OpenCode))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{}` cannot be probed (claude, codex, opencode)",
                args.agent
            )
        })?;
    let project = Project::discover(ctx)?;
    let manifest_bytes = agentpack_lockfile::read_regular_file(&project.manifest_path)
        .with_context(|| format!("cannot read {}", project.manifest_path.display()))?;
    let lock_bytes = match agentpack_lockfile::read_regular_file(&project.lock_path) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => {
            return Err(anyhow::Error::new(err)
                .context(format!("cannot read {}", project.lock_path.display())))
        }
    };
    let manifest = project.load_manifest()?;
    let mode = crate::commands::sync::resolve_mode(ctx, &manifest)?;
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
    if let Some(policy) = args.policy {
        let contract = project.root.join(crate::commands::preflight::CONTRACT_FILE);
        let contract_bytes = match agentpack_lockfile::read_regular_file(&contract) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                return Err(
                    anyhow::Error::new(err).context(format!("cannot read {}", contract.display()))
                )
            }
        };
        identities.policy = Some(identity::policy_digest(
            policy.as_str(),
            ctx.strict_external,
            contract_bytes.as_deref(),
        ));
    }
    let program = agentpack_harness::launch::resolve_binary(
        agent,
        std::env::var_os(agentpack_harness::launch::path_override_var(agent)).as_deref(),
        std::env::var_os("PATH").as_deref(),
    )?;
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
    let (scope, version, captured, parsed) = match agent {
        Agent::Claude => {
            let bundle = agentpack_harness::launch::claude_bundle(&staged);
            let mut command = base(&program, &project.workspace);
            command
                .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
                .arg("--plugin-dir")
                .arg(&bundle);
            // The settings a launch passes, so the session is the one a launch starts.
            if let Some(settings) = fs_err::read_to_string(bundle.join("agentpack-settings.json"))
                .ok()
                .as_deref()
                .and_then(agentpack_harness::launch::inline_settings)
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
            let captured = process::run(command, timeout, CAPTURE_BOUND, &init_seen)?;
            let parsed = parse::claude_init(&captured.stdout);
            let version = first_init(&captured.stdout);
            ("workspace_session", version, captured, parsed)
        }
        Agent::Codex => {
            let codex_home = scratch.path().join("codex-home");
            copy_regular(&staged.join("codex-home"), &codex_home)?;
            let with_home = |args: &[&str]| {
                let mut command = base(&program, &outside);
                command.args(args).env("CODEX_HOME", &codex_home);
                command
            };
            let (version, captured) =
                versioned(&with_home, &["debug", "prompt-input", "hi"], timeout)?;
            let parsed = match &version {
                Some(v) => parse::codex_prompt_input(&captured.stdout, v),
                None => Err(ParseFailure::Malformed(
                    "`codex --version` printed no version".to_owned(),
                )),
            };
            ("controlled_projection", version, captured, parsed)
        }
        _ => {
            let config_dir = scratch.path().join("opencode");
            copy_regular(&staged.join("opencode"), &config_dir)?;
            let with_config = |args: &[&str]| {
                let mut command = base(&program, &outside);
                command
                    .args(args)
                    .env("OPENCODE_CONFIG_DIR", &config_dir)
                    .env("XDG_CONFIG_HOME", home.join(".config"))
                    .env("XDG_DATA_HOME", home.join(".local/share"))
                    .env("XDG_CACHE_HOME", home.join(".cache"))
                    .env("XDG_STATE_HOME", home.join(".local/state"));
                command
            };
            let (version, captured) = versioned(&with_config, &["debug", "skill"], timeout)?;
            let parsed = match &version {
                Some(v) => parse::opencode_skills(&captured.stdout, v, &config_dir),
                None => Err(ParseFailure::Malformed(
                    "`opencode --version` printed no version".to_owned(),
                )),
            };
            ("controlled_projection", version, captured, parsed)
        }
    };
    let term = &captured.termination;
    let process_ok = match term.how.as_str() {
        "stopped" => true,
        "exited" => term.exit_code == Some(0),
        _ => false,
    };
    let (status, reason, catalog): (&str, Option<String>, Option<Catalog>) =
        if term.how == "timed_out" {
            (
                "timed_out",
                Some(format!(
                    "the client ran past the {}s timeout and was killed with its process group",
                    timeout.as_secs()
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
        evidence_digest: receipt::digest(&evidence),
    };
    let path = receipt::write(&project.state_dir().join(receipt::DIR), &receipt, &evidence)?;
    if ctx.json {
        let mut value = serde_json::to_value(&receipt)?;
        value["path"] = serde_json::Value::String(path.display().to_string());
        output::json(&value)?;
    } else {
        output::stdout(&human(&receipt, &path))?;
    }
    Ok(ExitCode::from(match receipt.status.as_str() {
        "complete" => 0,
        "unknown" => 4,
        _ => 5,
    }))
}

fn validated(agent: Agent) -> &'static str {
    match agent {
        Agent::Claude => parse::CLAUDE_VALIDATED,
        Agent::Codex => parse::CODEX_VALIDATED,
        _ => parse::OPENCODE_VALIDATED,
    }
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
