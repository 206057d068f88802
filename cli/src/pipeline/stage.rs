//! The compositions of the pipeline's steps that several commands share, with what they say:
//! - [`sync`]: resolve (reconciling the lock), write the lock when it changed, then [`stage`];
//! - [`stage`]: plan, build and select one mode (a launcher's agent only, honouring a rollback);
//!   a generation already published is selected without a plan;
//! - [`stage_resolved`]: [`stage`] what a relock or `env restore` already resolved;
//! - [`relock`] and [`record_mcp_servers`]: what `lock`, `update`, `add`, `remove` and `mcp`
//!   resolve and record before they write the files;
//! - [`tidy_after_sync`]: what every sync that is not a launcher's does afterwards.
//!
//! Each takes the command's one [`ProjectSession`]: nothing here opens the store or reads the
//! manifest or the lock again.

use std::path::Path;

use agentpack_builders::mcp_lock::{self, McpLockOptions};
use agentpack_builders::project::{
    PlannedInputs, ProjectSession, ResolvePolicy, Resolved, ResolvedMode,
};
use agentpack_builders::resolve::UpdatePolicy;
use agentpack_harness::Agent;
use anyhow::Result;

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::project::Project;
use crate::retired_homes;
use crate::rollback_record::{self, RolledBack};

use super::{check_verified, plan_options, resolve_mode, say_mirrored, say_warnings, Staged};

/// Who stages, and how.
#[derive(Debug, Clone, Default)]
pub struct StageOptions {
    /// The agent a launcher starts: only its part is planned and built, and its secret-bearing
    /// values are rendered even when the generation is reused (they never enter the store).
    pub agent: Option<Agent>,
    /// The agents whose secret-bearing values a sync of every agent returns too (`eject` names
    /// what their servers lack: every agent whose row renders secrets, Codex today).
    pub secrets_of: Vec<Agent>,
}

/// A full sync of the mode: resolve with `policy`, write the lock when it changed, stage.
pub fn sync(
    ctx: &Context,
    project: &Project,
    session: &mut ProjectSession,
    policy: &ResolvePolicy,
    options: StageOptions,
) -> Result<Staged> {
    let mode = resolve_mode(ctx, session.manifest())?;
    let _ticker = output::Ticker::start(ctx, "syncing");
    retired_homes::check_staging_root(&project.staging_root, &project.root, true)?;
    // The committed lock is what AGENTPACK_REQUIRE_VERIFIED judges, before anything rewrites it.
    if env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED) {
        check_verified(&session.lock()?)?;
    }
    let resolved = session.resolve(policy, None);
    say_warnings(session);
    let resolved = resolved?;
    for repaired in &resolved.repaired {
        output::warn(&format!(
            "replaced cache entry of {}: {}\n  old  {}\n  new  {}",
            repaired.module,
            repaired.cache.display(),
            repaired.old,
            repaired.new
        ));
    }
    if ctx.says() {
        for change in &resolved.changes {
            output::info(&change.to_string());
        }
    }
    say_mirrored(ctx, &resolved.lock, &project.home.root);
    check_verified(&resolved.lock)?;
    if session.save_lock(&resolved.lock, false)? && ctx.says() {
        output::info(&format!("Updated {}", project.lock_path.display()));
    }
    let mut staged = stage(ctx, project, session, &resolved, &mode, options)?;
    staged
        .package_warnings
        .clone_from(&resolved.package_warnings);
    after_staging(session);
    Ok(staged)
}

/// What every staging does last: the store's warnings are said, and the Codex session history
/// every Codex home links to exists.
fn after_staging(session: &ProjectSession) {
    say_warnings(session);
    if let Some(home) = env::var(EnvVars::HOME) {
        if let Err(error) =
            agentpack_harness::launch::home_layer::ensure_codex_history(Path::new(&home))
        {
            output::warn(&format!("{error}"));
        }
    }
}

/// Stages what `lock`/`update`/`add`/`remove` just resolved and wrote, or what `env restore`
/// resolved frozen (never writing the lock): its packages are fetched and verified, so this is what
/// a sync after them would do, without resolving again.
pub fn stage_resolved(
    ctx: &Context,
    project: &Project,
    session: &ProjectSession,
    resolved: &Resolved,
) -> Result<Staged> {
    let mode = resolve_mode(ctx, session.manifest())?;
    retired_homes::check_staging_root(&project.staging_root, &project.root, true)?;
    check_verified(&resolved.lock)?;
    let staged = stage(
        ctx,
        project,
        session,
        resolved,
        &mode,
        StageOptions::default(),
    )?;
    after_staging(session);
    Ok(staged)
}

/// A launcher's staging: a full sync of the mode for `agent` only, under the project lock, over
/// the project and store the launcher already has (discovered and opened once per launch).
pub fn stage_for_launch(
    ctx: &Context,
    project: &Project,
    agent: Agent,
    store: &std::sync::Arc<agentpack_store::Store>,
) -> Result<Staged> {
    let _lock = crate::project_lock::ProjectLock::acquire(&project.state_dir(), &project.root)?;
    let mut session = super::open_with_store(project, std::sync::Arc::clone(store))?;
    let policy = ResolvePolicy::Sync {
        update: UpdatePolicy::KeepPins,
        repair: false,
    };
    sync(
        ctx,
        project,
        &mut session,
        &policy,
        StageOptions {
            agent: Some(agent),
            secrets_of: Vec::new(),
        },
    )
}

/// Plan, build and select `mode` from `resolved`.
pub fn stage(
    ctx: &Context,
    project: &Project,
    session: &ProjectSession,
    resolved: &Resolved,
    mode: &ResolvedMode,
    options: StageOptions,
) -> Result<Staged> {
    let plan_options = plan_options(ctx)?;
    let agents: Vec<Agent> = match options.agent {
        // A launch renders, stages and reports only its own agent; a bare sync does all six.
        Some(agent) => vec![agent],
        None => Agent::ALL.to_vec(),
    };
    let state_dir = project.state_dir();
    let planned = session.planned_inputs(resolved, mode, &plan_options);
    say_warnings(session);
    let planned = planned?;
    match options.agent {
        // A sync the user runs builds from the lock again: it ends a rollback.
        None => rollback_record::clear(&state_dir, &mode.dir),
        Some(agent) => {
            if let Some(staged) = stage_rolled_back(ctx, project, session, &planned, mode, agent)? {
                return Ok(staged);
            }
        }
    }
    // A published generation is used without a plan: only the secret values asked for are
    // rendered (what rendering reported was said when it was built, and stays in its report).
    let secrets_of = match options.agent {
        Some(agent) => vec![agent],
        None => options.secrets_of.clone(),
    };
    let reused = session.reuse(&planned, &mode.dir, &agents, &secrets_of);
    say_warnings(session);
    if let Some(built) = reused? {
        let selected = session.select(&mode.dir, &built)?;
        let mut staged = Staged::of(project, &mode.dir, &selected.pointer, selected.generation);
        staged.secrets = built.secrets;
        return Ok(staged);
    }
    let plan = session.plan_of(planned, mode, &agents);
    say_warnings(session);
    let plan = plan?;
    let built = session.build(&plan);
    say_warnings(session);
    let built = built?;
    // What rendering reported is said when it renders; a reused generation keeps it in its
    // report (`sync --json` shows it).
    if !built.reused {
        for warning in &built.warnings {
            output::warn(warning);
        }
    }
    // Launches omit routine hook-rendering messages.
    if ctx.says() && !built.reused && options.agent.is_none() {
        for line in &built.info {
            output::info(line);
        }
    }
    let selected = session.select(&mode.dir, &built)?;
    let mut staged = Staged::of(project, &mode.dir, &selected.pointer, selected.generation);
    staged.secrets = built.secrets;
    for &agent in &options.secrets_of {
        if staged.secrets.contains_key(&agent) {
            continue;
        }
        let secrets =
            agentpack_builders::generation::render_secrets(session.store(), plan.inputs(), agent)?;
        if !secrets.is_empty() {
            staged.secrets.insert(agent, secrets);
        }
    }
    Ok(staged)
}

/// A launch while a rollback of its mode holds (see [`rollback_record`]): the rolled-back
/// generation, with the agent's secret values rendered from the current inputs; says so the first
/// time. `None` when no rollback holds.
fn stage_rolled_back(
    ctx: &Context,
    project: &Project,
    session: &ProjectSession,
    planned: &PlannedInputs,
    mode: &ResolvedMode,
    agent: Agent,
) -> Result<Option<Staged>> {
    let pointer = session.pointer(&mode.dir);
    let selected = pointer.current();
    let state_dir = project.state_dir();
    let RolledBack::Yes {
        generation,
        announce,
    } = rollback_record::check(
        &state_dir,
        project,
        &mode.name,
        &mode.dir,
        selected.as_deref(),
    )
    else {
        return Ok(None);
    };
    if session.store().store_path_of(&generation).is_none() {
        rollback_record::clear(&state_dir, &mode.dir);
        return Ok(None);
    }
    if announce && ctx.says() {
        output::info(&format!(
            "mode `{}` is rolled back: launching the generation `agentpack rollback` selected ({}), not one built from pack.lock; run `agentpack sync` to build from pack.lock again",
            mode.name,
            generation.display()
        ));
    }
    let secrets =
        agentpack_builders::generation::render_secrets(session.store(), &planned.inputs, agent)?;
    let mut staged = Staged::of(project, &mode.dir, pointer.path(), generation);
    if !secrets.is_empty() {
        staged.secrets.insert(agent, secrets);
    }
    Ok(Some(staged))
}

/// What every sync that is not a launcher's does after it selected a generation: the workspace
/// links a launcher placed (Cursor's `.cursor/agents`, agy's `.agents/plugins/agentpack-bundle`)
/// are removed, since no agent of this command uses them, and the home layers of retired
/// generations that nothing uses go (see [`retired_homes`]).
pub fn tidy_after_sync(ctx: &Context, session: &ProjectSession, staged: &Staged) -> Result<()> {
    let mut links = agentpack_harness::launch::home_layer::WorkspaceLinks::load(&staged.state_dir)?;
    for warning in links.remove_all_except(None)? {
        output::warn(&warning);
    }
    links.save()?;
    // Work directories of killed runs (partial downloads...): every sync removes them, the fast
    // path's too (see agentpack_builders::leftovers).
    for warning in agentpack_builders::leftovers::sweep_store(session.store()).warnings {
        output::warn(&warning);
    }
    retired_homes::retire(
        ctx,
        session.store(),
        staged,
        retired_homes::Reach::AlsoGoneProjects,
    );
    Ok(())
}

/// Resolves the session's manifest on purpose (`lock`, `update`, `add`, `remove`, `mcp`) and says
/// what moved; writes nothing.
pub fn relock(
    ctx: &Context,
    project: &Project,
    session: &ProjectSession,
    update: UpdatePolicy,
    replace_unreadable: bool,
) -> Result<Resolved> {
    let name_each = |module: &str| output::progress(ctx, &format!("resolving {module}"));
    let ticker = output::Ticker::start(ctx, "resolving");
    let policy = ResolvePolicy::Relock {
        update,
        replace_unreadable,
    };
    let resolved = session.resolve(&policy, Some(&name_each));
    drop(ticker);
    say_warnings(session);
    let resolved = resolved?;
    if ctx.says() {
        for change in &resolved.changes {
            output::info(&change.to_string());
        }
    }
    say_mirrored(ctx, &resolved.lock, &project.home.root);
    Ok(resolved)
}

/// Records every MCP server of the project (all modes) in `resolved.lock`, keeping records whose
/// definition did not change and pinning new or changed npm servers against their registry (see
/// `mcp_lock`); the previous records are those of `resolved.old_lock`.
pub fn record_mcp_servers(
    ctx: &Context,
    session: &ProjectSession,
    resolved: &mut Resolved,
    options: &McpLockOptions,
) -> Result<()> {
    let servers = session.mcp_servers(resolved, &ResolvedMode::all(), &plan_options(ctx)?);
    say_warnings(session);
    let outcome = mcp_lock::record(&servers?, &resolved.old_lock, options)?;
    for warning in &outcome.warnings {
        output::warn(warning);
    }
    resolved.lock.mcp_servers = outcome.records;
    Ok(())
}
