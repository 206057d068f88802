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
//!
//! A bare sync whose inputs are those of the last full one (a fingerprint, recorded after it) takes
//! the fast path: it selects that generation again and does none of the steps above (see
//! `fast_path`); `AGENTPACK_FULL_VERIFY`, `--update-lock` and `--repair` never take it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use agentpack_builders::fetch::{check_lock, fetch_lock, FetchOptions};
use agentpack_builders::generation::pointer::ModePointer;
use agentpack_builders::generation::{
    build_generation_for, merged_mcp_servers, render_secrets, staged, GenerationInputs,
    LockedPackageInput,
};
use agentpack_builders::mcp_lock::{self, McpLockOptions};
use agentpack_builders::resolve::{resolve, ResolveEnv, UpdatePolicy};
use agentpack_builders::session::GitHubSession;
use agentpack_harness::home_layer::AGY_OVERLAY_LINK;
use agentpack_harness::{Agent, ModeFilter, SecretLayer};
use agentpack_lockfile::{keys, Lockfile, Manifest, Mode, Selector, DEFAULT_MODE};
use agentpack_store::{hash_tree_without_link, Store, StorePath};
use anyhow::{bail, Context as _, Result};
use clap::Args;

use crate::commands::retired_homes;
use crate::commands::rollback_record::{self, RolledBack};
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
    /// After a successful sync, probe every installed supported agent (`probe --all`).
    #[arg(long, conflicts_with_all = ["dry_run", "verify_only"])]
    pub probe: bool,
}

/// How a sync resolves.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    pub policy: UpdatePolicy,
    pub repair: bool,
    /// The agent a launcher starts: its secret-bearing values are rendered even when the generation
    /// is reused (they never enter the store).
    pub agent: Option<Agent>,
    /// A launcher's sync: a rollback of the mode that still holds is kept (see
    /// [`rollback_record`]); any other sync ends it.
    pub launch: bool,
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
    /// What fetching or copying the packages said (already printed): a bare sync's fast path says
    /// it again, since it is about the package sources as they still are.
    pub package_warnings: Vec<String>,
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
        launch: false,
    };
    // A bare sync whose inputs are those of the last verified one selects its generation again.
    let fast = if args.update_lock || args.repair {
        None
    } else {
        fast_path(ctx, &project)?
    };
    let staged = match fast {
        Some(staged) => staged,
        None => {
            let staged = run_sync(ctx, &project, &options)?;
            if let Err(error) = record_fast_path(ctx, &project, &staged) {
                tracing::debug!("the next sync will not take the fast path: {error:#}");
            }
            staged
        }
    };
    tidy_after_sync(ctx, &project, &staged)?;
    let probed = if args.probe {
        Some(crate::commands::probe::all::probe_all(ctx, None)?)
    } else {
        None
    };
    if ctx.json {
        // What rendering reported, collisions (both sides kept, the earlier one renamed) included.
        let report = staged::read_report_at(&staged.generation);
        let lock = Lockfile::load_if_exists(&project.lock_path)?.unwrap_or_default();
        let mut body = serde_json::json!({
            "mode": mode_name(ctx),
            "pointer": staged.pointer,
            "generation": staged.generation,
            "warnings": report.warnings,
            "collisions": report.collisions,
            "mirrored": mirrored_packages(&lock, &project.home.root),
        });
        if let Some(rows) = &probed {
            body["probes"] = serde_json::to_value(rows)?;
        }
        output::json(&body)?;
    } else if ctx.says() {
        output::info(&format!(
            "Staged mode `{}` at {}",
            mode_name(ctx),
            staged.pointer.display()
        ));
    }
    if let Some(rows) = &probed {
        if !ctx.json {
            output::stdout(&crate::commands::probe::all::table(rows))?;
        }
        return Ok(crate::commands::probe::all::exit_code(rows));
    }
    Ok(ExitCode::SUCCESS)
}

// ----- the fast path of a bare sync -----

/// What a full bare sync left for the next one: the fingerprint of its inputs (the launch fast
/// path's, extended to every agent, see [`crate::commands::launch::fingerprint_inputs`]) and the
/// generation it selected. In `$AGENTPACK_HOME/projects/<hash>/launch/<mode-dir>.sync.json`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SyncRecord {
    version: u32,
    fingerprint: String,
    generation: PathBuf,
    /// What fetching and copying the packages said; said again by the fast path.
    #[serde(default)]
    package_warnings: Vec<String>,
}

const SYNC_RECORD_VERSION: u32 = 1;

fn sync_record_path(state_dir: &Path, mode_dir: &str) -> PathBuf {
    state_dir
        .join("launch")
        .join(format!("{mode_dir}.sync.json"))
}

fn sync_fingerprint(
    ctx: &Context,
    project: &Project,
    generation: &Path,
    lock: Option<&Lockfile>,
) -> String {
    let (inputs, extra) = crate::commands::launch::fingerprint_inputs(
        ctx,
        None,
        &project.root,
        &project.workspace,
        &project.home.root,
        generation,
        lock,
    );
    agentpack_harness::launch::fingerprint::compute_extended(&inputs, &extra)
}

/// Records the inputs of a full sync that verified everything it staged from.
fn record_fast_path(ctx: &Context, project: &Project, staged: &Staged) -> Result<()> {
    let record = SyncRecord {
        version: SYNC_RECORD_VERSION,
        fingerprint: sync_fingerprint(
            ctx,
            project,
            &staged.generation,
            Lockfile::load(&project.lock_path).ok().as_ref(),
        ),
        generation: staged.generation.clone(),
        package_warnings: staged.package_warnings.clone(),
    };
    let mut bytes = serde_json::to_vec(&record)?;
    bytes.push(b'\n');
    crate::commands::launch::write_private(
        &sync_record_path(&staged.state_dir, &staged.mode_dir),
        &bytes,
    )
}

/// Makes the next bare sync a full one (a damaged staged tree was found).
fn forget_fast_path(project: &Project, mode_dir: &str) {
    let _ = fs_err::remove_file(sync_record_path(&project.state_dir(), mode_dir));
}

/// The generation of the last full sync, when the manifest, the lock, the overlay, eject's record,
/// the mode, the toggles and the cache slots (their links into the immutable store) are unchanged
/// since: it is selected again without fetching, hashing, rendering, reading MCP definitions or
/// building an HTTP client. Like a launch that skips the sync, it does not re-hash the cache or
/// the staged tree: a file changed in place there is found by `sync --verify-only` (which then makes
/// the next sync a full one) or with `AGENTPACK_FULL_VERIFY=1`.
fn fast_path(ctx: &Context, project: &Project) -> Result<Option<Staged>> {
    if env::flag(EnvVars::AGENTPACK_FULL_VERIFY) {
        tracing::debug!("sync fast path declined: AGENTPACK_FULL_VERIFY is set");
        return Ok(None);
    }
    let mode_dir = keys::mode_dir_component(mode_name(ctx));
    let state_dir = project.state_dir();
    let Some(record) = fs_err::read(sync_record_path(&state_dir, &mode_dir))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<SyncRecord>(&bytes).ok())
        .filter(|record| record.version == SYNC_RECORD_VERSION)
    else {
        tracing::debug!("sync fast path declined: no record of a full sync of this mode");
        return Ok(None);
    };
    // The pointer still selects the generation the fingerprint was taken with (a rollback moved it).
    let pointer = ModePointer::new(&project.staging_root, &mode_dir);
    if fs_err::canonicalize(pointer.path()).ok().as_deref() != Some(record.generation.as_path()) {
        tracing::debug!("sync fast path declined: the pointer selects another generation");
        return Ok(None);
    }
    let Ok(lock) = Lockfile::load(&project.lock_path) else {
        return Ok(None);
    };
    if sync_fingerprint(ctx, project, &record.generation, Some(&lock)) != record.fingerprint {
        tracing::debug!("sync fast path declined: inputs changed since the last full sync");
        return Ok(None);
    }
    if env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED) && lock.unverified_packages().count() > 0 {
        // The full sync refuses it with the documented message.
        return Ok(None);
    }
    retired_homes::check_staging_root(&project.staging_root, &project.root, true)?;
    print_warnings(&record.package_warnings);
    say_mirrored(ctx, &lock, &project.home.root);
    check_verified(&lock)?;
    // A sync the user runs ends a rollback, as the full path does.
    rollback_record::clear(&state_dir, &mode_dir);
    if let Some(home) = env::var(EnvVars::HOME) {
        if let Err(error) = agentpack_harness::home_layer::ensure_codex_history(Path::new(&home)) {
            output::warn(&format!("{error}"));
        }
    }
    tracing::debug!(
        "sync fast path: inputs unchanged, selecting {}",
        record.generation.display()
    );
    Ok(Some(Staged {
        project_root: project.root.clone(),
        project_hash: project.hash.clone(),
        agentpack_home: project.home.root.clone(),
        staging_root: project.staging_root.clone(),
        mode_dir,
        pointer: pointer.path().to_path_buf(),
        generation: record.generation,
        state_dir,
        secrets: BTreeMap::new(),
        package_warnings: record.package_warnings,
    }))
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
    // Work directories of killed runs (partial downloads...): every sync removes them, the fast
    // path's too (see agentpack_builders::leftovers).
    for warning in agentpack_builders::leftovers::sweep_store(&store).warnings {
        output::warn(&warning);
    }
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
    let (lock, slots, package_warnings) =
        reconcile(ctx, project, &manifest, &old_lock, &store, &github, options)?;
    say_mirrored(ctx, &lock, &project.home.root);
    check_verified(&lock)?;
    if lock.save_unless_unchanged(&project.lock_path)? && ctx.says() {
        output::info(&format!("Updated {}", project.lock_path.display()));
    }
    let verified = Verified {
        manifest: &manifest,
        lock: &lock,
        slots: &slots,
    };
    let mut staged = stage(ctx, project, &verified, &store, &mode, options)?;
    staged.package_warnings = package_warnings;
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
        launch: true,
        ..SyncOptions::default()
    };
    run_sync(ctx, &project, &options)
}

/// Step 5 alone, for `env restore`: build (or reuse) the mode's generation from a lock whose
/// packages the caller already fetched and verified (`slots`), and select it. Never reconciles or
/// writes the lock.
pub fn stage_locked(
    ctx: &Context,
    project: &Project,
    manifest: &Manifest,
    lock: &Lockfile,
    slots: &BTreeMap<String, PathBuf>,
    store: &Arc<Store>,
) -> Result<Staged> {
    let mode = resolve_mode(ctx, manifest)?;
    retired_homes::check_staging_root(&project.staging_root, &project.root, true)?;
    let verified = Verified {
        manifest,
        lock,
        slots,
    };
    stage(
        ctx,
        project,
        &verified,
        store,
        &mode,
        &SyncOptions::default(),
    )
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
) -> Result<(Lockfile, BTreeMap<String, PathBuf>, Vec<String>)> {
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
        return Ok((lock, outcome.slots, outcome.warnings));
    }
    let env = ResolveEnv {
        project_root: &project.root,
        agentpack_home: &project.home.root,
        fetcher: &github.fetcher,
        store: store.as_ref(),
        progress: None,
        // `sync --update-lock` re-resolves on purpose, like `lock --update`: it records hashes.
        keep_unhashed: matches!(options.policy, UpdatePolicy::KeepPins),
    };
    let outcome = resolve(manifest, Some(old_lock), &options.policy, &env)?;
    print_warnings(&outcome.warnings);
    if ctx.says() {
        for change in &outcome.changes {
            output::info(&change.to_string());
        }
    }
    Ok((outcome.lock, outcome.slots, outcome.warnings))
}

/// A package of a GitHub module that the `$AGENTPACK_HOME/local/` mirror served instead of GitHub.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MirroredPackage {
    pub module: String,
    /// The lock's `url` (`local:<owner>/<repo>[/<path>]`).
    pub source: String,
    /// The mirror directory it was copied from.
    pub dir: PathBuf,
}

/// Every package of `lock` that names a GitHub module but was copied from the `local/` mirror.
pub fn mirrored_packages(lock: &Lockfile, agentpack_home: &Path) -> Vec<MirroredPackage> {
    lock.packages
        .iter()
        .filter(|package| package.module.as_str().starts_with("github.com/"))
        .filter_map(|package| {
            let spec = package.url.strip_prefix("local:")?;
            Some(MirroredPackage {
                module: package.module.as_str().to_owned(),
                source: package.url.clone(),
                dir: agentpack_builders::local_package::local_mirror_dir(agentpack_home, spec),
            })
        })
        .collect()
}

/// Says, once per command, which GitHub modules the `local/` mirror served: a mirror directory
/// wins over the network, even for a constraint it may not meet, and that must not go unnoticed.
pub fn say_mirrored(ctx: &Context, lock: &Lockfile, agentpack_home: &Path) {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    if !ctx.says() {
        return;
    }
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for mirrored in mirrored_packages(lock, agentpack_home) {
        if said.insert(mirrored.module.clone()) {
            output::info(&format!(
                "{}: served from the local mirror {}, not from GitHub (a directory under $AGENTPACK_HOME/local/ wins over the network); remove it to fetch from GitHub",
                mirrored.module,
                mirrored.dir.display()
            ));
        }
    }
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
    /// `[modes.<name>]` as declared (the filter is built from it).
    pub declared: Mode,
}

pub(crate) fn resolve_mode(ctx: &Context, manifest: &Manifest) -> Result<ResolvedMode> {
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
        declared: mode,
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
    // The overlay is the workspace's (the checkout's), which is the project root with one root.
    let overlay_dir = project.workspace.join(".agents");
    // What `agentpack eject` wrote under ./.agents/ is output, never an input: the mode leaves it
    // out of the overlay, and an overlay of nothing else is no overlay.
    let ejected = ejected_overlay_files(&project.workspace);
    let own_files = has_own_files(&overlay_dir, &ejected);
    let (filter, selectors) = if ejected.is_empty() || !own_files {
        (mode.filter.clone(), mode.selectors.clone())
    } else {
        let mut declared = mode.declared.clone();
        declared
            .disable
            .extend(ejected.iter().cloned().map(Selector::Agents));
        let mut selectors = mode.selectors.clone();
        selectors.extend(ejected.iter().map(|path| format!("ejected=.agents/{path}")));
        (ModeFilter::from_mode(&declared), selectors)
    };
    // agy's workspace plugin link is agentpack's, not project content; an overlay with nothing
    // else in it is no overlay.
    let overlay = if env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0")
        && overlay_dir.is_dir()
        && own_files
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
        mode: filter,
        mode_selectors: selectors,
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

/// The files `agentpack eject` recorded under `./.agents/` (relative to it), from
/// `.agentpack/eject/manifest.json`; none when there is no such record.
pub(crate) fn ejected_overlay_files(project_root: &Path) -> Vec<String> {
    let path = project_root.join(agentpack_harness::eject::MANIFEST_PATH);
    let Ok(text) = fs_err::read_to_string(&path) else {
        return Vec::new();
    };
    match serde_json::from_str::<agentpack_harness::eject::EjectManifest>(&text) {
        Ok(manifest) => manifest
            .files
            .iter()
            .filter_map(|file| file.path.strip_prefix(".agents/"))
            .map(str::to_owned)
            .collect(),
        Err(error) => {
            output::warn(&format!(
                "{} does not parse ({error}); files eject wrote under .agents/ cannot be told from yours and are staged as the project overlay\n  fix  restore it from version control",
                path.display()
            ));
            Vec::new()
        }
    }
}

/// Whether `./.agents/` holds anything besides eject's files and agy's workspace link.
pub(crate) fn has_own_files(overlay_dir: &Path, ejected: &[String]) -> bool {
    if ejected.is_empty() {
        return true;
    }
    let ejected: std::collections::BTreeSet<&str> = ejected.iter().map(String::as_str).collect();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let Ok(entries) = fs_err::read_dir(overlay_dir.join(&relative)) else {
            // Unreadable: let the overlay reader say what is wrong.
            return true;
        };
        for entry in entries.flatten() {
            let relative = relative.join(entry.file_name());
            let text = relative.to_string_lossy();
            let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
            if is_dir {
                pending.push(relative);
            } else if text != AGY_OVERLAY_LINK && !ejected.contains(text.as_ref()) {
                return true;
            }
        }
    }
    false
}

/// The mode filter that selects everything: what `lock` records MCP servers for.
fn all_mode() -> ResolvedMode {
    ResolvedMode {
        name: DEFAULT_MODE.to_owned(),
        dir: DEFAULT_MODE.to_owned(),
        filter: ModeFilter::all(),
        selectors: Vec::new(),
        declared: Mode::default(),
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
    options: &SyncOptions,
) -> Result<Staged> {
    let agent = options.agent;
    let mut inputs = generation_inputs(ctx, project, verified, store, mode)?;
    // MCP servers run what the lock pins: an exact npm version, or `mcp-exec` over a locked tree.
    let (servers, warnings) = merged_mcp_servers(store, &inputs)?;
    print_warnings(&warnings);
    let prepared =
        mcp_lock::prepare_launches(store, verified.lock, &servers, &inputs.agentpack_exe)?;
    print_warnings(&prepared.warnings);
    inputs.mcp_launch = prepared.launches;
    inputs.extra_references = prepared.references;
    let pointer = ModePointer::new(&project.staging_root, &mode.dir);
    match agent.filter(|_| options.launch) {
        // A sync the user runs builds from the lock again: it ends a rollback.
        None => rollback_record::clear(&project.state_dir(), &mode.dir),
        Some(agent) => {
            if let Some(staged) =
                stage_rolled_back(ctx, project, store, mode, &pointer, &inputs, agent)?
            {
                return Ok(staged);
            }
        }
    }
    // A launch renders, stages and reports only its own agent; a bare sync does all six.
    let agents: Vec<Agent> = match agent.filter(|_| options.launch) {
        Some(agent) => vec![agent],
        None => Agent::ALL.to_vec(),
    };
    let mut built = build_generation_for(store, &inputs, &agents)?;
    if let Some(agent) = agent.filter(|agent| !built.secrets.contains_key(agent)) {
        let secrets = render_secrets(store, &inputs, agent)?;
        if !secrets.is_empty() {
            built.secrets.insert(agent, secrets);
        }
    }
    if built.reused && restore_if_changed(store, &built.path, &pointer)? {
        // Repair removed what it could not restore: build it again from the verified packages.
        built = build_generation_for(store, &inputs, &agents)?;
    }
    // What rendering reported is said when it renders; a reused generation keeps it in its report
    // (`sync --json` shows it).
    if !built.reused {
        for warning in &built.warnings {
            output::warn(warning);
        }
    }
    // Launches omit routine hook-rendering messages.
    if ctx.says() && !built.reused && !options.launch {
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
        package_warnings: Vec::new(),
    })
}

/// A launch while a rollback of its mode holds (see [`rollback_record`]): the rolled-back
/// generation, with the agent's secret values rendered from the current inputs; says so the first
/// time. `None` when no rollback holds.
fn stage_rolled_back(
    ctx: &Context,
    project: &Project,
    store: &Arc<Store>,
    mode: &ResolvedMode,
    pointer: &ModePointer,
    inputs: &GenerationInputs,
    agent: Agent,
) -> Result<Option<Staged>> {
    let selected = pointer.current();
    let RolledBack::Yes {
        generation,
        announce,
    } = rollback_record::check(
        &project.state_dir(),
        &project.root,
        &mode.name,
        &mode.dir,
        selected.as_deref(),
    )
    else {
        return Ok(None);
    };
    if store.store_path_of(&generation).is_none() {
        rollback_record::clear(&project.state_dir(), &mode.dir);
        return Ok(None);
    }
    if announce && ctx.says() {
        output::info(&format!(
            "mode `{}` is rolled back: launching the generation `agentpack rollback` selected ({}), not one built from pack.lock; run `agentpack sync` to build from pack.lock again",
            mode.name,
            generation.display()
        ));
    }
    let secrets = render_secrets(store, inputs, agent)?;
    let mut by_agent = BTreeMap::new();
    if !secrets.is_empty() {
        by_agent.insert(agent, secrets);
    }
    Ok(Some(Staged {
        project_root: project.root.clone(),
        project_hash: project.hash.clone(),
        agentpack_home: project.home.root.clone(),
        staging_root: project.staging_root.clone(),
        mode_dir: mode.dir.clone(),
        pointer: pointer.path().to_path_buf(),
        generation,
        state_dir: project.state_dir(),
        secrets: by_agent,
        package_warnings: Vec::new(),
    }))
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
    // Same-size edits through a hard link: each file against its blob's identity stamp (cheap),
    // hashed when the stamp differs (see docs/src/store.md, "Integrity").
    let edited = store.changed_files(generation)?;
    if diff.is_clean() && edited.is_empty() {
        return Ok(false);
    }
    let report = agentpack_store::verify(store, agentpack_store::VerifyOptions { repair: true })?;
    let mut named: Vec<String> = diff
        .lines()
        .into_iter()
        .map(|(kind, path)| format!("{kind} {}", path.display()))
        .collect();
    for relative in edited {
        let line = format!("modified {}", pointer.path().join(&relative).display());
        if !named.contains(&line) {
            named.push(line);
        }
    }
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
    // Checks only: a missing or changed store path is reported, never fetched or copied again.
    let outcome =
        check_lock(&lock, store.as_ref()).inspect_err(|_| forget_fast_path(project, &mode.dir))?;
    if !outcome.problems.is_empty() {
        forget_fast_path(project, &mode.dir);
        let mut message = format!(
            "{} package(s) of pack.lock are not in the store as locked",
            outcome.problems.len()
        );
        for problem in &outcome.problems {
            message.push_str(&format!("\n  {problem}"));
        }
        message.push_str("\n  fix       agentpack sync --repair   (fetches or copies them again and verifies them against pack.lock)");
        bail!(message);
    }
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
        // The next sync must not take the fast path: it restores and reports what changed.
        forget_fast_path(project, &mode.dir);
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
