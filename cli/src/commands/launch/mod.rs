//! The launchers (`agentpack claude`, `agent`, `opencode`, `codex`, `grok`, `agy`): stage, prepare
//! the agent's home layer, hold a lease on the generation, run the agent, pass its exit code on.
//!
//! One launch resolves the mode's pointer once and uses that generation throughout, so a sync that
//! switches the pointer while the agent runs does not change what it sees. When the manifest, the
//! lock, the workspace's `.agents/`, the mode, the target, the cache slots (their links into the
//! immutable store) and the path packages' sources are unchanged since the last full sync of this
//! launcher (the fingerprint in `$AGENTPACK_HOME/projects/<hash>/launch/`, `<hash>` of the
//! (definition, workspace) pair as every project state is, kept and compared by [`fast_path`]; what
//! it covers is shared with a bare sync's fast path, in `crate::pipeline::fingerprint`), nothing is
//! staged; `AGENTPACK_FULL_VERIFY=1` always takes the full sync. Otherwise a published generation that
//! serves the agent is used without a plan (`pipeline::stage`): only its secret values are rendered.
//!
//! The agent runs as a child, not through `exec`, so the launcher can release its lease when the
//! agent exits; the child's pid is leased too, so the generation stays protected if the launcher is
//! killed. Warnings are printed before the agent starts; nothing is printed after it exits except
//! errors.
//!
//! `--strict-external` ([`refuse_workspace_overlay`]): the launch writes no configuration into the
//! checkout. Claude Code (`--plugin-dir`, `--settings`), OpenCode (`OPENCODE_CONFIG_DIR`), Codex
//! (`CODEX_HOME`) and Grok (`GROK_HOME`) get theirs from outside it; Cursor and Antigravity read a
//! workspace overlay and are refused before anything is staged or written.
//! When the definition has `contract.json`, a strict launch evaluates it for its agent after
//! staging, under the generation's lease and for that generation, with preflight's evaluation
//! (`local` policy, the agent's newest probe receipt when there is one: [`contract_refusal`]),
//! and refuses to start the agent on a violation (exit 3) or a required unknown (exit 4). The
//! evaluation works on the project the launch discovered and the receipt it located once; after a
//! fast path, on the definition and lock bytes the fast path fingerprinted (read once, through the
//! read-only session preflight uses), so a strict fast launch reads `agentpack.toml`, `pack.lock`
//! and the receipt once each.

mod fast_path;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentpack_harness::launch::command::{self as launch, LaunchRequest};
use agentpack_harness::launch::home_layer::{self, HomeLayerRequest, UserEnv};
use agentpack_harness::launch::run_child;
use agentpack_harness::{Agent, SecretLayer};
use agentpack_store::{LeaseOptions, Store};
use anyhow::{Context as _, Result};

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::evidence::policy::CONTRACT_FILE;
use crate::output;
use crate::pipeline::stage::stage_for_launch;
use crate::pipeline::Staged;
use crate::project::Project;
use crate::retired_homes;
use agentpack_builders::project::{ProjectFiles, ProjectSession};

/// Arguments of every launcher.
#[derive(Debug, Clone, clap::Args)]
pub struct LaunchArgs {
    /// Arguments passed to the agent unchanged; put `--` before them when one looks like an
    /// agentpack flag.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<OsString>,
}

/// Variables the launcher reads for binary paths and the home layers (a layer does not override
/// one the user set, such as OpenCode's lsp tool switch).
const BRIDGED: [&str; 5] = [
    "CURSOR_DATA_DIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "DOCKER_CONFIG",
    agentpack_harness::launch::home_layer::OPENCODE_LSP_TOOL_VAR,
];

/// Runs `agent` with `args`.
pub fn run(ctx: &Context, agent: Agent, args: &LaunchArgs) -> Result<ExitCode> {
    if ctx.strict_external {
        refuse_workspace_overlay(agent)?;
    }
    // Discovered once: the fast path, staging's refusal checks and a strict launch's contract
    // evaluation all work on this project (its definition and workspace roots).
    let project = Project::discover(ctx)?;
    if ctx.strict_external {
        refuse_recorded_links(&project.state_dir(), agent)?;
    }
    let program = crate::env::agent_binary(agent)?;
    // The same store options as every command (host id, link mode, local index); one handle
    // stages and holds the lease.
    let store = crate::session::open_store(&project.home)
        .context("cannot open the store to take a lease on the generation")?;
    let read = DefinitionRead::of(ctx, &project);
    let (staged, fast) = match fast_path::check(ctx, &project, agent, read.files())? {
        Some(staged) => (staged, true),
        None => {
            let staged = stage_for_launch(ctx, &project, agent, &store)?;
            if let Err(error) = fast_path::record(ctx, &project, agent, &staged) {
                output::warn(&format!(
                    "the next launch will sync again: cannot record this one ({error:#})"
                ));
            }
            (staged, false)
        }
    };
    let generation = staged.generation.clone();
    let store_path = store.store_path_of(&generation);
    let lease = match &store_path {
        Some(path) => {
            Some(store.acquire_lease(std::slice::from_ref(path), LeaseOptions::default())?)
        }
        None => {
            output::warn(&format!(
                "{} is not in the store; launching without a lease, so `agentpack gc` may remove it while {} runs",
                generation.display(),
                agent.display_name()
            ));
            None
        }
    };

    // `--strict-external`: the default contract, evaluated under the lease, before the agent starts;
    // over the bytes the fast path read, when nothing was staged since.
    if ctx.strict_external {
        let session = if fast { read.session() } else { None };
        let refusal = contract_refusal(ctx, agent, &generation, &project, session);
        if let Some((code, error)) = refusal {
            if let Some(lease) = &lease {
                let _ = store.release_lease(lease);
            }
            output::print_error(&error);
            return Ok(ExitCode::from(code));
        }
    }

    let result = launch_with_lease(
        ctx,
        agent,
        args,
        &program,
        &staged,
        &store,
        store_path.as_ref(),
    );
    if let Some(lease) = &lease {
        let _ = store.release_lease(lease);
    }
    let code = result?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The definition and the lock as this launch first read them (for the fast path's fingerprint).
/// A strict launch whose definition has a contract reads them through a read-only session, which
/// its contract evaluation goes on with when the fast path is taken; any other launch reads just
/// the two files. `None` when they cannot be read: the full sync says why.
enum DefinitionRead {
    Files(Option<ProjectFiles>),
    Session(Box<ProjectSession>),
}

impl DefinitionRead {
    fn of(ctx: &Context, project: &Project) -> DefinitionRead {
        if ctx.strict_external && project.root.join(CONTRACT_FILE).is_file() {
            if let Ok(session) = crate::pipeline::open_read_only(project) {
                return DefinitionRead::Session(Box::new(session));
            }
        }
        DefinitionRead::Files(ProjectFiles::read(&project.manifest_path, &project.lock_path).ok())
    }

    fn files(&self) -> Option<&ProjectFiles> {
        match self {
            DefinitionRead::Files(files) => files.as_ref(),
            DefinitionRead::Session(session) => Some(session.files()),
        }
    }

    fn session(&self) -> Option<&ProjectSession> {
        match self {
            DefinitionRead::Files(_) => None,
            DefinitionRead::Session(session) => Some(session),
        }
    }
}

/// `--strict-external`: refuses the agents whose launch writes into the checkout, naming why.
pub fn refuse_workspace_overlay(agent: Agent) -> Result<()> {
    let Some(link) = &agent.profile().workspace_link else {
        return Ok(());
    };
    let external: Vec<&str> = Agent::ALL
        .into_iter()
        .filter(|other| other.profile().workspace_link.is_none())
        .map(Agent::display_name)
        .collect();
    let external = match external.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "another agent".to_owned(),
    };
    anyhow::bail!(
        "--strict-external: cannot launch {} without writing into the checkout: {}; nothing was written\n  fix  launch {external}, or drop --strict-external",
        agent.display_name(),
        link.why
    )
}

/// `--strict-external`: evaluates `contract.json` beside the definition (when there is one) for
/// `agent` and the leased `generation`, as `agentpack --strict-external preflight --policy local
/// --receipt latest` does (the newest receipt only when there is one), and returns the exit code
/// and the error naming each blocking finding when the contract does not hold.
fn contract_refusal(
    ctx: &Context,
    agent: Agent,
    generation: &Path,
    project: &Project,
    session: Option<&ProjectSession>,
) -> Option<(u8, anyhow::Error)> {
    let evaluation =
        match crate::check::evaluate_default_contract(ctx, agent, generation, project, session) {
            Ok(None) => return None,
            Ok(Some(evaluation)) if evaluation.exit_code == 0 => return None,
            Ok(Some(evaluation)) => evaluation,
            Err(error) => {
                return Some((
                    5,
                    error.context("--strict-external: cannot evaluate the contract"),
                ))
            }
        };
    let mut message = format!(
        "--strict-external: not launching {}: the contract {} does not hold (preflight exit {}); {} was not started",
        agent.display_name(),
        evaluation.contract.display(),
        evaluation.exit_code,
        agent.display_name()
    );
    for (finding, remedy) in &evaluation.blocking {
        message.push_str(&format!("\n  {finding}"));
        if !remedy.is_empty() {
            message.push_str(&format!("\n    fix  {remedy}"));
        }
    }
    message.push_str(&format!(
        "\n  fix  run `agentpack --strict-external preflight --agent {}` for the full report",
        agent.as_str()
    ));
    Some((evaluation.exit_code, anyhow::anyhow!(message)))
}

/// `--strict-external`: a launch removes the workspace links an earlier Cursor or Antigravity
/// launch placed in the checkout; a strict one refuses instead, before anything is staged.
fn refuse_recorded_links(state_dir: &Path, agent: Agent) -> Result<()> {
    let links = home_layer::WorkspaceLinks::load(state_dir)?;
    let recorded: Vec<String> = links
        .links()
        .iter()
        .filter(|link| link.agent != agent.as_str())
        .filter(|link| std::fs::symlink_metadata(&link.link).is_ok())
        .map(|link| link.link.display().to_string())
        .collect();
    if recorded.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "--strict-external: launching {} would remove the workspace links of an earlier launch from the checkout: {}\n  fix  run `agentpack sync` once (it removes them), then launch again",
        agent.display_name(),
        recorded.join(", ")
    )
}

fn launch_with_lease(
    ctx: &Context,
    agent: Agent,
    args: &LaunchArgs,
    program: &Path,
    staged: &Staged,
    store: &Store,
    store_path: Option<&agentpack_store::StorePath>,
) -> Result<i32> {
    let workspace = ctx.workspace.clone().unwrap_or_else(|| ctx.cwd.clone());
    let user = user_env()?;
    let secrets = expanded_secrets(staged, agent);
    let staging_override = env::var(EnvVars::AGENTPACK_STAGING_ROOT).map(PathBuf::from);
    let keychain = cfg!(target_os = "macos").then(|| home_layer::SecurityCli {
        program: "/usr/bin/security".into(),
    });
    let request = HomeLayerRequest {
        agent,
        generation: &staged.generation,
        project_root: &staged.project_root,
        project_hash: &staged.project_hash,
        mode_dir: &staged.mode_dir,
        agentpack_home: &staged.agentpack_home,
        staging_root_override: staging_override.as_deref(),
        state_dir: &staged.state_dir,
        user: &user,
        secrets: &secrets,
        keep_attribution: env::flag(EnvVars::AGENTPACK_KEEP_ATTRIBUTION),
        yolo: ctx.yolo,
        workspace: &workspace,
        keychain: keychain.as_ref(),
    };
    let prepared = home_layer::prepare(&request)
        .with_context(|| format!("cannot prepare the {} home layer", agent.display_name()))?;
    for warning in &prepared.warnings {
        output::warn(warning);
    }
    if prepared.mirror_reused {
        tracing::debug!(
            "home layer: already mirrors {}, not re-mirrored",
            staged.generation.display()
        );
    }
    retired_homes::retire(ctx, store, staged, retired_homes::Reach::ThisProject);
    let profile = agent.profile();
    let settings = match profile.launcher.settings_file {
        Some(name) => {
            let file = staged.generation.join(profile.staged_root).join(name);
            let text = fs_err::read_to_string(&file).with_context(|| {
                format!(
                    "cannot read the staged {} settings {}\n  fix  run `agentpack sync`",
                    agent.display_name(),
                    file.display()
                )
            })?;
            launch::inline_settings(&text)
        }
        None => None,
    };
    let mut command = launch::build_command(&LaunchRequest {
        agent,
        program: program.to_path_buf(),
        generation: &staged.generation,
        prepared: &prepared,
        yolo: ctx.yolo,
        user_args: &args.args,
        workspace: &workspace,
        claude_settings: settings.as_deref(),
    });
    // `--proxy`: started after staging, so a failed sync starts nothing; stopped (and its log
    // lines flushed) once the agent has exited, or when this function returns early.
    let proxy = if ctx.proxy {
        Some(start_proxy(ctx, staged)?)
    } else {
        None
    };
    if let Some(proxy) = &proxy {
        command.env.insert(
            EnvVars::ANTHROPIC_BASE_URL.to_string(),
            proxy.base_url().into(),
        );
    }
    let mut child_lease = None;
    let code = run_child(&command, &ctx.cwd, |pid| {
        if let Some(path) = store_path {
            let options = LeaseOptions {
                pid: Some(pid),
                ..LeaseOptions::default()
            };
            child_lease = store
                .acquire_lease(std::slice::from_ref(path), options)
                .ok();
        }
    })
    .with_context(|| format!("cannot start {}", command.program.display()))?;
    if let Some(proxy) = proxy {
        proxy.stop();
    }
    if let Some(lease) = &child_lease {
        let _ = store.release_lease(lease);
    }
    if let Err(error) = home_layer::after_exit(&request, &prepared) {
        output::warn(&format!("{error}"));
    }
    Ok(code)
}

/// Starts the Claude diagnostics proxy (`--proxy`) with its log under the project's state
/// directory unless `AGENTPACK_PROXY_LOG_DIR` says otherwise, and says where it logs.
fn start_proxy(ctx: &Context, staged: &Staged) -> Result<crate::proxy::RunningProxy> {
    let config = crate::proxy::ProxyConfig::from_lookup(
        &|name| env::var(name),
        staged.state_dir.join("proxy-logs"),
    )?;
    let upstream = config.describe_upstream();
    let proxy = crate::proxy::start(config).context("cannot start the Claude proxy")?;
    if ctx.verbosity != crate::context::Verbosity::Quiet {
        output::info(&format!(
            "Claude API proxy on {} forwarding to {upstream}; log: {}",
            proxy.base_url(),
            proxy.log_path().display()
        ));
    }
    Ok(proxy)
}

/// The agent's secret layer for this launch: the recorded layer keeps secret templates as
/// written, and their `${VAR}` references are expanded here, from the launching environment, at
/// every launch. Warns (before the agent starts) for each variable that is not set.
fn expanded_secrets(staged: &Staged, agent: Agent) -> SecretLayer {
    let Some(layer) = staged.secrets.get(&agent) else {
        return SecretLayer::default();
    };
    let lookup = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    let (expanded, warnings) = layer.expanded(&lookup);
    for warning in &warnings {
        output::warn(warning);
    }
    expanded
}

fn user_env() -> Result<UserEnv> {
    let home = env::var(EnvVars::HOME)
        .map(PathBuf::from)
        .context("HOME is not set\n  fix  set HOME to your home directory")?;
    let vars = BRIDGED
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (name.to_string(), value)))
        .collect();
    Ok(UserEnv {
        home,
        xdg_config_home: env::var("XDG_CONFIG_HOME").map(PathBuf::from),
        vars,
    })
}
