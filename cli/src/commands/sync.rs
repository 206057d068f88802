//! `agentpack sync`: verify the lock and the store, build (or find) the mode's generation, select it.
//!
//! The pipeline, in order, each step stopping the command before anything is staged:
//! 1. read the manifest and the lock (an invalid or inconsistent lock is refused, nothing written);
//! 2. with `--repair`, re-fetch cache entries that fail verification;
//! 3. with a non-empty `[dependencies]`, reconcile the lock with the manifest, keeping every pin already
//!    locked (`--update-lock` moves floating pins); with an empty one the lock is authoritative and is
//!    only fetched and verified;
//! 4. write the lock only when its bytes change, and say so one line per pin that moved;
//! 5. build the generation (a no-op when its inputs are unchanged) and switch the pointer
//!    `<staging-root>/modes/<mode>` to it, recording it in the generation history.
//!
//! `--dry-run` reports what it would do and writes nothing; `--verify-only` checks the lock, the store
//! and the staged files against the generation's record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use agentpack_builders::fetch::{fetch_lock, FetchOptions};
use agentpack_builders::generation::pointer::ModePointer;
use agentpack_builders::generation::{
    build_generation, merged_mcp_servers, render_secrets, staged, GenerationInputs,
    LockedPackageInput,
};
use agentpack_builders::mcp_lock::{self, McpLockOptions};
use agentpack_builders::resolve::{resolve, ResolveEnv, UpdatePolicy};
use agentpack_builders::session::GitHubSession;
use agentpack_harness::home_layer::AGY_OVERLAY_LINK;
use agentpack_harness::{Agent, ModeFilter, SecretLayer};
use agentpack_lockfile::{keys, Lockfile, Manifest, DEFAULT_MODE};
use agentpack_store::{hash_tree_without_link, Store, StorePath};
use anyhow::{bail, Context as _, Result};
use clap::Args;

use crate::commands::retired_homes;
use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::project::Project;
use crate::session;

#[derive(Debug, Args, Default)]
pub struct SyncArgs {
    /// Report what sync would do, writing nothing.
    #[arg(long, conflicts_with_all = ["verify_only", "repair", "update_lock"])]
    pub dry_run: bool,
    /// Check the lock, the store and the staged files only; rebuild nothing.
    #[arg(long, conflicts_with_all = ["repair", "update_lock"])]
    pub verify_only: bool,
    /// Re-resolve floating pins (branches, floating constraints) while syncing.
    #[arg(long)]
    pub update_lock: bool,
    /// Re-fetch cache entries that do not match pack.lock, verify them, and replace them.
    #[arg(long)]
    pub repair: bool,
}

/// How a sync resolves.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    pub policy: UpdatePolicy,
    pub repair: bool,
    /// The agent a launcher starts: its secret-bearing values are rendered even when the generation
    /// is reused (they never enter the store).
    pub agent: Option<Agent>,
}

/// What a sync selected: everything a launcher needs.
#[derive(Debug)]
#[allow(dead_code)] // read by the launchers
pub struct Staged {
    pub project_root: PathBuf,
    pub project_hash: String,
    pub agentpack_home: PathBuf,
    pub staging_root: PathBuf,
    pub mode_dir: String,
    /// `<staging-root>/modes/<mode-dir>`.
    pub pointer: PathBuf,
    /// The resolved store path of the generation; a launch keeps using it.
    pub generation: PathBuf,
    /// `$AGENTPACK_HOME/projects/<hash>`.
    pub state_dir: PathBuf,
    /// Secret-bearing values per agent (only when the generation was rendered in this run).
    pub secrets: BTreeMap<Agent, SecretLayer>,
}

pub fn run(ctx: &Context, args: &SyncArgs) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    if args.dry_run {
        return dry_run(ctx, &project);
    }
    if args.verify_only {
        return verify_only(ctx, &project);
    }
    let options = SyncOptions {
        policy: if args.update_lock {
            UpdatePolicy::UpdateAll
        } else {
            UpdatePolicy::KeepPins
        },
        repair: args.repair,
        agent: None,
    };
    let staged = run_sync(ctx, &project, &options)?;
    tidy_after_sync(ctx, &project, &staged)?;
    if ctx.says() {
        output::info(&format!(
            "Staged mode `{}` at {}",
            mode_name(ctx),
            staged.pointer.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// What every sync that is not a launcher's does after it selected a generation: the workspace
/// links a launcher placed (Cursor's `.cursor/agents`, agy's `.agents/plugins/agentpack-bundle`)
/// are removed, since no agent of this command uses them, and the home layers of retired
/// generations that nothing uses go (see [`retired_homes`]).
pub fn tidy_after_sync(ctx: &Context, project: &Project, staged: &Staged) -> Result<()> {
    let mut links = agentpack_harness::home_layer::WorkspaceLinks::load(&staged.state_dir)?;
    for warning in links.remove_all_except(None)? {
        output::warn(&warning);
    }
    links.save()?;
    let store = session::open_store(&project.home)?;
    retired_homes::retire(ctx, &store, staged, retired_homes::Reach::AlsoGoneProjects);
    Ok(())
}

/// The mode this command stages.
pub fn mode_name(ctx: &Context) -> &str {
    ctx.mode.as_deref().unwrap_or(DEFAULT_MODE)
}

/// Runs a full sync and returns what it selected.
pub fn run_sync(ctx: &Context, project: &Project, options: &SyncOptions) -> Result<Staged> {
    let manifest = project.load_manifest()?;
    let old_lock = project.load_lock(&manifest)?;
    let mode = resolve_mode(ctx, &manifest)?;
    let store = session::open_store(&project.home)?;
    let github = session::github(&store)?;
    github
        .resolver()
        .set_refresh(!matches!(options.policy, UpdatePolicy::KeepPins));
    let _ticker = output::Ticker::start(ctx, "syncing");

    retired_homes::check_staging_root(&project.staging_root, &project.root, true)?;
    // The committed lock is what AGENTPACK_REQUIRE_VERIFIED judges, before anything rewrites it.
    if env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED) {
        check_verified(&old_lock)?;
    }
    let (lock, slots) = reconcile(ctx, project, &manifest, &old_lock, &store, &github, options)?;
    check_verified(&lock)?;
    if lock.save(&project.lock_path)? && ctx.says() {
        output::info(&format!("Updated {}", project.lock_path.display()));
    }
    let verified = Verified {
        manifest: &manifest,
        lock: &lock,
        slots: &slots,
    };
    let staged = stage(ctx, project, &verified, &store, &mode, options.agent)?;
    session::flush_store_warnings(&store);
    // Every Codex home links to the native session history, so every sync makes sure it exists.
    if let Some(home) = env::var(EnvVars::HOME) {
        if let Err(error) = agentpack_harness::home_layer::ensure_codex_history(Path::new(&home)) {
            output::warn(&format!("{error}"));
        }
    }
    Ok(staged)
}

/// What a launcher calls: a full sync of the mode (the fast path is the launcher's).
#[allow(dead_code)] // wired by the launchers
pub fn stage_for_launch(ctx: &Context, agent: Agent) -> Result<Staged> {
    let project = Project::discover(ctx)?;
    let _lock = crate::project_lock::ProjectLock::acquire(&project.state_dir(), &project.root)?;
    let options = SyncOptions {
        agent: Some(agent),
        ..SyncOptions::default()
    };
    run_sync(ctx, &project, &options)
}

/// Steps 2 to 4: the lock this sync stages, and the verified slot of each package.
fn reconcile(
    ctx: &Context,
    project: &Project,
    manifest: &Manifest,
    old_lock: &Lockfile,
    store: &Arc<Store>,
    github: &GitHubSession,
    options: &SyncOptions,
) -> Result<(Lockfile, BTreeMap<String, PathBuf>)> {
    let fetch = |lock: &Lockfile, repair: bool| {
        fetch_lock(
            lock,
            &project.root,
            &project.home.root,
            &github.fetcher,
            store.as_ref(),
            FetchOptions { repair },
        )
    };
    if options.repair {
        let outcome = fetch(old_lock, true)?;
        for repaired in &outcome.repaired {
            output::warn(&format!(
                "replaced cache entry of {}: {}\n  old  {}\n  new  {}",
                repaired.module,
                repaired.cache.display(),
                repaired.old,
                repaired.new
            ));
        }
    }
    if manifest.dependencies.is_empty() {
        // The lock is authoritative: fetch and verify it; path packages follow their directories.
        let outcome = fetch(old_lock, false)?;
        print_warnings(&outcome.warnings);
        let mut lock = old_lock.clone();
        for entry in outcome.updated_entries {
            if let Some(slot) = lock.packages.iter_mut().find(|p| p.module == entry.module) {
                *slot = entry;
            }
        }
        return Ok((lock, outcome.slots));
    }
    let env = ResolveEnv {
        project_root: &project.root,
        agentpack_home: &project.home.root,
        fetcher: &github.fetcher,
        store: store.as_ref(),
        progress: None,
    };
    let outcome = resolve(manifest, Some(old_lock), &options.policy, &env)?;
    print_warnings(&outcome.warnings);
    if ctx.says() {
        for change in &outcome.changes {
            output::info(&change.to_string());
        }
    }
    Ok((outcome.lock, outcome.slots))
}

fn print_warnings(warnings: &[String]) {
    for warning in warnings {
        output::warn(warning);
    }
}

/// `AGENTPACK_REQUIRE_VERIFIED` and the one-line warning for unverified packages.
fn check_verified(lock: &Lockfile) -> Result<()> {
    let unverified = lock.unverified_packages().count();
    if unverified == 0 {
        return Ok(());
    }
    if env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED) {
        bail!(
            "{unverified} package(s) in pack.lock have no content hash and AGENTPACK_REQUIRE_VERIFIED is set\n  fix  run `agentpack lock` to record them, then commit pack.lock"
        );
    }
    output::warn(&format!(
        "{unverified} package(s) in pack.lock have no content hash and are not verified; run `agentpack lock` to record them"
    ));
    Ok(())
}

/// The mode to stage, as a filter plus its name, directory and selectors.
pub struct ResolvedMode {
    pub name: String,
    pub dir: String,
    pub filter: ModeFilter,
    pub selectors: Vec<String>,
}

fn resolve_mode(ctx: &Context, manifest: &Manifest) -> Result<ResolvedMode> {
    let name = mode_name(ctx).to_owned();
    let Some(mode) = manifest.mode(&name) else {
        bail!(
            "mode `{name}` is not declared in agentpack.toml (declared: {})\n  fix  create it with `agentpack mode create {name}`, or pick one with --mode",
            manifest.mode_names().join(", ")
        );
    };
    let filter = ModeFilter::from_mode(&mode);
    let enable: Vec<String> = mode.enable.iter().map(ToString::to_string).collect();
    let disable: Vec<String> = mode.disable.iter().map(ToString::to_string).collect();
    let mut selectors = vec![format!("base={}", mode.base.as_str())];
    selectors.extend(enable.iter().map(|s| format!("enable={s}")));
    selectors.extend(disable.iter().map(|s| format!("disable={s}")));
    Ok(ResolvedMode {
        dir: keys::mode_dir_component(&name),
        name,
        filter,
        selectors,
    })
}

/// What the verify phase produced: the manifest, the lock to stage and each package's verified slot.
struct Verified<'a> {
    manifest: &'a Manifest,
    lock: &'a Lockfile,
    slots: &'a BTreeMap<String, PathBuf>,
}

/// The generation inputs of this project, mode and lock.
fn generation_inputs(
    ctx: &Context,
    project: &Project,
    verified: &Verified<'_>,
    store: &Store,
    mode: &ResolvedMode,
) -> Result<GenerationInputs> {
    let Verified {
        manifest,
        lock,
        slots,
    } = *verified;
    let mut packages = Vec::new();
    for package in &lock.packages {
        let module = package.module.as_str();
        let store_path = slots
            .get(module)
            .and_then(|slot| store.store_path_of(slot))
            .with_context(|| {
                format!("{module} has no verified cache entry\n  fix  run `agentpack sync` again, or `agentpack sync --repair`")
            })?;
        packages.push(LockedPackageInput::new(package, store_path));
    }
    let overlay_dir = project.root.join(".agents");
    // agy's workspace plugin link is agentpack's, not project content; an overlay with nothing
    // else in it is no overlay.
    let overlay = if env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0")
        && overlay_dir.is_dir()
    {
        hash_tree_without_link(&overlay_dir, AGY_OVERLAY_LINK)
            .with_context(|| format!("cannot read the project overlay {}", overlay_dir.display()))?
            .map(|hash| (overlay_dir, hash.to_string()))
    } else {
        None
    };
    let agentpack_exe = std::env::current_exe()
        .and_then(fs_err::canonicalize)
        .context("cannot find the path of the running agentpack executable")?;
    Ok(GenerationInputs {
        mode_name: mode.name.clone(),
        mode_dir: mode.dir.clone(),
        mode: mode.filter.clone(),
        mode_selectors: mode.selectors.clone(),
        packages,
        overlay,
        mcp_servers: manifest.mcp_servers.clone(),
        mcp_launch: BTreeMap::new(),
        keep_attribution: env::flag(EnvVars::AGENTPACK_KEEP_ATTRIBUTION),
        yolo: ctx.yolo,
        agentpack_exe,
        plugin_data_root: project.state_dir().join("plugin-data"),
        extra_references: Vec::new(),
    })
}

/// The mode filter that selects everything: what `lock` records MCP servers for.
fn all_mode() -> ResolvedMode {
    ResolvedMode {
        name: DEFAULT_MODE.to_owned(),
        dir: DEFAULT_MODE.to_owned(),
        filter: ModeFilter::all(),
        selectors: Vec::new(),
    }
}

/// Records every MCP server of the project (all modes) in `lock`, keeping records whose definition did
/// not change and pinning new or changed npm servers against their registry (see `mcp_lock`).
pub fn record_mcp_servers(
    ctx: &Context,
    project: &Project,
    manifest: &Manifest,
    lock: &mut Lockfile,
    slots: &BTreeMap<String, PathBuf>,
    old: &Lockfile,
    options: &McpLockOptions,
) -> Result<()> {
    let store = session::open_store(&project.home)?;
    let verified = Verified {
        manifest,
        lock,
        slots,
    };
    let inputs = generation_inputs(ctx, project, &verified, &store, &all_mode())?;
    let (servers, warnings) = merged_mcp_servers(&store, &inputs)?;
    print_warnings(&warnings);
    let outcome = mcp_lock::record(&servers, old, options)?;
    print_warnings(&outcome.warnings);
    lock.mcp_servers = outcome.records;
    Ok(())
}

/// Step 5: build or reuse the generation and select it.
fn stage(
    ctx: &Context,
    project: &Project,
    verified: &Verified<'_>,
    store: &Arc<Store>,
    mode: &ResolvedMode,
    agent: Option<Agent>,
) -> Result<Staged> {
    let mut inputs = generation_inputs(ctx, project, verified, store, mode)?;
    // MCP servers run what the lock pins: an exact npm version, or `mcp-exec` over a locked tree.
    let (servers, warnings) = merged_mcp_servers(store, &inputs)?;
    print_warnings(&warnings);
    let prepared =
        mcp_lock::prepare_launches(store, verified.lock, &servers, &inputs.agentpack_exe)?;
    print_warnings(&prepared.warnings);
    inputs.mcp_launch = prepared.launches;
    inputs.extra_references = prepared.references;
    let mut built = build_generation(store, &inputs)?;
    if let Some(agent) = agent.filter(|agent| !built.secrets.contains_key(agent)) {
        let secrets = render_secrets(store, &inputs, agent)?;
        if !secrets.is_empty() {
            built.secrets.insert(agent, secrets);
        }
    }
    let pointer = ModePointer::new(&project.staging_root, &mode.dir);
    if built.reused && restore_if_changed(store, &built.path, &pointer)? {
        // Repair removed what it could not restore: build it again from the verified packages.
        built = build_generation(store, &inputs)?;
    }
    for warning in &built.warnings {
        output::warn(warning);
    }
    if ctx.says() && !built.reused {
        for line in &built.info {
            output::info(line);
        }
    }
    // Roots first, then the switch: GC must never see a selected generation without a root.
    store.add_generation_root(&history_name(project, &mode.dir), &built.path)?;
    pointer.switch_to(built.path.path())?;
    store.add_indirect_root(pointer.path())?;
    Ok(Staged {
        project_root: project.root.clone(),
        project_hash: project.hash.clone(),
        agentpack_home: project.home.root.clone(),
        staging_root: project.staging_root.clone(),
        mode_dir: mode.dir.clone(),
        pointer: pointer.path().to_path_buf(),
        generation: built.path.path().to_path_buf(),
        state_dir: project.state_dir(),
        secrets: built.secrets,
    })
}

/// The store's generation history of one project and mode.
pub fn history_name(project: &Project, mode_dir: &str) -> String {
    format!("{}/{mode_dir}", project.hash)
}

/// A reused generation whose files changed since it was published is restored from the store, and
/// the files are named, as the docs' sync report does. Returns true when the generation had to be
/// removed (nothing good was left to restore it from) and must be built again.
fn restore_if_changed(
    store: &Arc<Store>,
    generation: &StorePath,
    pointer: &ModePointer,
) -> Result<bool> {
    let diff = staged::quick_check(store, generation, pointer.path())?;
    if diff.is_clean() {
        return Ok(false);
    }
    let report = agentpack_store::verify(store, agentpack_store::VerifyOptions { repair: true })?;
    let named: Vec<String> = diff
        .lines()
        .into_iter()
        .map(|(kind, path)| format!("{kind} {}", path.display()))
        .collect();
    output::warn(&format!(
        "{} staged file(s) changed since the last sync and were replaced from the verified cache: {}",
        named.len(),
        named.join("; ")
    ));
    Ok(store.get(generation.name()).is_none() || !report.unrepairable.is_empty())
}

fn verify_only(ctx: &Context, project: &Project) -> Result<ExitCode> {
    let manifest = project.load_manifest()?;
    let lock = project.load_lock(&manifest)?;
    let mode = resolve_mode(ctx, &manifest)?;
    let store = session::open_store(&project.home)?;
    let github = session::github(&store)?;
    let outcome = fetch_lock(
        &lock,
        &project.root,
        &project.home.root,
        &github.fetcher,
        store.as_ref(),
        FetchOptions { repair: false },
    )?;
    print_warnings(&outcome.warnings);
    check_verified(&lock)?;
    retired_homes::check_staging_root(&project.staging_root, &project.root, false)?;
    let pointer = ModePointer::new(&project.staging_root, &mode.dir);
    let generation = pointer
        .current()
        .and_then(|target| store.store_path_of(&target));
    let Some(generation) = generation else {
        bail!(
            "no staging recorded for mode `{}` at {}\n  fix  run `agentpack sync` once",
            mode.name,
            pointer.path().display()
        );
    };
    let diff = staged::check_staged(&store, &generation, pointer.path())?;
    if !diff.is_clean() {
        let mut message = String::from("staged tree does not match the last sync");
        for (kind, path) in diff.lines() {
            message.push_str(&format!("\n  {kind:<9} {}", path.display()));
        }
        message.push_str("\n  fix       agentpack sync   (rebuilds staging from the verified cache and reports what it replaced)");
        bail!(message);
    }
    if ctx.json {
        output::json(&serde_json::json!({
            "verify_only": true,
            "mode": mode.name,
            "verified": true,
            "packages": lock.packages.len(),
            "generation": generation.name().as_str(),
            "pointer": pointer.path(),
        }))?;
    } else if ctx.says() {
        output::info(&format!(
            "pack.lock, the cache and the staged files of mode `{}` verify",
            mode.name
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn dry_run(ctx: &Context, project: &Project) -> Result<ExitCode> {
    let manifest = project.load_manifest()?;
    let lock = project.load_lock(&manifest)?;
    let mode = resolve_mode(ctx, &manifest)?;
    let mut actions = Vec::new();
    let locked: std::collections::BTreeSet<&str> = lock
        .packages
        .iter()
        .filter(|p| p.direct)
        .map(|p| p.module.as_str())
        .collect();
    for module in manifest.dependencies.keys() {
        if !locked.contains(module.as_str()) {
            actions.push(format!("would resolve {module} and add it to pack.lock"));
        }
    }
    if !manifest.dependencies.is_empty() {
        for module in &locked {
            if !manifest.dependencies.keys().any(|m| m.as_str() == *module) {
                actions.push(format!("would remove {module} from pack.lock"));
            }
        }
    }
    let cache = project.home.root.join("cache");
    for package in &lock.packages {
        let slot = cache.join(package.cache_key.as_str());
        if !slot.exists() {
            actions.push(format!(
                "would fetch {} at {}",
                package.module, package.commit
            ));
        }
    }
    let pointer = ModePointer::new(&project.staging_root, &mode.dir);
    actions.push(format!(
        "would build or reuse the generation of mode `{}` and point {} at it",
        mode.name,
        pointer.path().display()
    ));
    if ctx.json {
        output::json(
            &serde_json::json!({ "dry_run": true, "mode": mode.name, "actions": actions }),
        )?;
    } else {
        for action in actions {
            output::stdout(&format!("{action}\n"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
