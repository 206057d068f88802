//! `agentpack sync`: verify the lock and the store, build (or find) the mode's generation, select it.
//!
//! A sync is the whole pipeline of `agentpack_builders::project` (composed in
//! `crate::pipeline::stage::sync`), each step stopping the command before anything is staged:
//! 1. resolve: read the manifest and the lock (an invalid or inconsistent lock is refused, nothing
//!    written); with `--repair`, re-fetch cache entries that fail verification; with a non-empty
//!    `[dependencies]`, reconcile the lock with the manifest, keeping every pin already locked
//!    (`--update-lock` moves floating pins); with an empty one the lock is authoritative and is
//!    only fetched and verified;
//! 2. write the lock only when its bytes change, and say so one line per pin that moved;
//! 3. plan, build the generation (a no-op when its inputs are unchanged) and select it: switch the
//!    pointer `<staging-root>/modes/<mode>` to it, recording it in the generation history.
//!
//! `--dry-run` reports what it would do and writes nothing (with every package in the store, the
//! whole plan: see `agentpack_builders::project::Plan`); `--verify-only` checks the lock, the store
//! and the staged files against the generation's record.
//!
//! A bare sync whose inputs are those of the last full one (a fingerprint, recorded after it) takes
//! the fast path: it selects that generation again and does none of the steps above (see
//! `fast_path`); `AGENTPACK_FULL_VERIFY`, `--update-lock` and `--repair` never take it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_builders::generation::staged;
use agentpack_builders::project::{ProjectSession, ResolvePolicy};
use agentpack_builders::resolve::UpdatePolicy;
use agentpack_harness::Agent;
use agentpack_lockfile::{keys, Lockfile};
use anyhow::{bail, Result};
use clap::Args;

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::pipeline::fingerprint::{
    fingerprint_inputs_with, lock_inputs, write_private, LockInputs,
};
use crate::pipeline::stage::{self, StageOptions};
use crate::pipeline::{self, mode_name, Staged};
use crate::project::Project;
use crate::retired_homes;
use crate::rollback_record;
use agentpack_harness::launch::fingerprint::Listings;

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
    /// With `--probe`: bind the probes' receipts to this policy (as `probe --policy`; `local`
    /// when not given).
    #[arg(long, value_enum, requires = "probe")]
    pub policy: Option<crate::evidence::policy::Policy>,
}

/// What `sync --probe` adds after staging: the probes' rows as JSON, their table, and the exit
/// code they make. The dispatcher supplies the probing (`commands/mod.rs`), so this module never
/// calls the probe command.
pub struct ProbeReport {
    pub json: serde_json::Value,
    pub table: String,
    pub exit: ExitCode,
}

/// Runs every installed probe after a `sync --probe`, its receipts bound to the policy given.
pub type ProbeAfterSync<'a> =
    &'a dyn Fn(&Context, Option<crate::evidence::policy::Policy>) -> Result<ProbeReport>;

pub fn run(ctx: &Context, args: &SyncArgs, probe_all: ProbeAfterSync<'_>) -> Result<ExitCode> {
    let project = Project::discover(ctx)?;
    if args.dry_run {
        return dry_run(ctx, &project);
    }
    let mut session = pipeline::open(&project)?;
    if args.verify_only || args.repair {
        // Looking for damage: every package is hashed, whatever this user's blob stamps say.
        session.store().verify_slots_in_full();
    }
    if args.verify_only {
        return verify_only(ctx, &project, &session);
    }
    let policy = ResolvePolicy::Sync {
        update: if args.update_lock {
            UpdatePolicy::UpdateAll
        } else {
            UpdatePolicy::KeepPins
        },
        repair: args.repair,
    };
    // A bare sync whose inputs are those of the last verified one selects its generation again.
    let fast = if args.update_lock || args.repair {
        None
    } else {
        fast_path(ctx, &project, &session)?
    };
    let staged = match fast {
        Some(staged) => staged,
        None => {
            let staged = stage::sync(
                ctx,
                &project,
                &mut session,
                &policy,
                StageOptions::default(),
            )?;
            if let Err(error) = record_fast_path(ctx, &project, &session, &staged) {
                tracing::debug!("the next sync will not take the fast path: {error:#}");
            }
            staged
        }
    };
    stage::tidy_after_sync(ctx, &session, &staged)?;
    let probed = if args.probe {
        Some(probe_all(ctx, args.policy)?)
    } else {
        None
    };
    if ctx.json {
        // What rendering reported, collisions (both sides kept, the earlier one renamed) included.
        let report = staged::read_report_at(&staged.generation);
        let lock = session.lock()?;
        let mut body = serde_json::json!({
            "mode": mode_name(ctx),
            "pointer": staged.pointer,
            "generation": staged.generation,
            "warnings": report.warnings,
            "collisions": report.collisions,
            "mirrored": pipeline::mirrored_packages(&lock, &project.home.root),
        });
        if let Some(probed) = &probed {
            body["probes"] = probed.json.clone();
        }
        output::json(&body)?;
    } else if ctx.says() {
        output::info(&format!(
            "Staged mode `{}` at {}",
            mode_name(ctx),
            staged.pointer.display()
        ));
    }
    if let Some(probed) = probed {
        if !ctx.json {
            output::stdout(&probed.table)?;
        }
        return Ok(probed.exit);
    }
    Ok(ExitCode::SUCCESS)
}

// ----- the fast path of a bare sync -----

/// What a full bare sync left for the next one: the fingerprint of its inputs (the launch fast
/// path's, extended to every agent, see
/// [`crate::pipeline::fingerprint::fingerprint_inputs_with`]), the generation it selected, and
/// what the fast path would otherwise parse the lock for. In
/// `$AGENTPACK_HOME/projects/<hash>/launch/<mode-dir>.sync.json`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SyncRecord {
    version: u32,
    fingerprint: String,
    generation: PathBuf,
    /// What fetching and copying the packages said; said again by the fast path.
    #[serde(default)]
    package_warnings: Vec<String>,
    /// What the fingerprint took from the lock (its slots and source directories). The
    /// fingerprint covers the lock's bytes, so while it matches these are what the lock names.
    lock_inputs: LockInputs,
    /// Whether the lock has packages without a content hash or served from the `local/` mirror:
    /// only then does the fast path parse the lock, to say so as a full sync would.
    lock_needs_notice: bool,
    /// The source directories' listings the fingerprint read: the fast path lists a directory
    /// again only when its times moved (see `Listings`).
    #[serde(default)]
    listings: Listings,
}

const SYNC_RECORD_VERSION: u32 = 2;

fn sync_record_path(state_dir: &Path, mode_dir: &str) -> PathBuf {
    state_dir
        .join("launch")
        .join(format!("{mode_dir}.sync.json"))
}

/// The fingerprint and the source directories' listings it read (`previous` spares listing the
/// unchanged ones again).
fn sync_fingerprint(
    ctx: &Context,
    project: &Project,
    generation: &Path,
    lock_inputs: LockInputs,
    previous: &Listings,
) -> (String, Listings) {
    let (inputs, extra) = fingerprint_inputs_with(
        ctx,
        None,
        &project.root,
        &project.workspace,
        generation,
        lock_inputs,
    );
    agentpack_harness::launch::fingerprint::compute_with_listings(&inputs, &extra, previous)
}

/// Does the fast path have to say something about `lock` (unverified or mirrored packages)?
fn lock_needs_notice(lock: &Lockfile, agentpack_home: &Path) -> bool {
    lock.unverified_packages().next().is_some()
        || !pipeline::mirrored_packages(lock, agentpack_home).is_empty()
}

/// Records the inputs of a full sync that verified everything it staged from.
fn record_fast_path(
    ctx: &Context,
    project: &Project,
    session: &ProjectSession,
    staged: &Staged,
) -> Result<()> {
    let lock = session.lock().ok();
    let lock_inputs = lock_inputs(&project.root, &project.home.root, lock.as_ref());
    let (fingerprint, listings) = sync_fingerprint(
        ctx,
        project,
        &staged.generation,
        lock_inputs.clone(),
        &Listings::default(),
    );
    let record = SyncRecord {
        version: SYNC_RECORD_VERSION,
        fingerprint,
        generation: staged.generation.clone(),
        package_warnings: staged.package_warnings.clone(),
        lock_inputs,
        lock_needs_notice: lock
            .as_ref()
            .is_none_or(|lock| lock_needs_notice(lock, &project.home.root)),
        listings,
    };
    write_record(&record, &staged.state_dir, &staged.mode_dir)
}

fn write_record(record: &SyncRecord, state_dir: &Path, mode_dir: &str) -> Result<()> {
    let mut bytes = serde_json::to_vec(record)?;
    bytes.push(b'\n');
    write_private(&sync_record_path(state_dir, mode_dir), &bytes)
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
fn fast_path(ctx: &Context, project: &Project, session: &ProjectSession) -> Result<Option<Staged>> {
    if env::flag(EnvVars::AGENTPACK_FULL_VERIFY) {
        tracing::debug!("sync fast path declined: AGENTPACK_FULL_VERIFY is set");
        return Ok(None);
    }
    let mode_dir = keys::mode_dir_component(mode_name(ctx));
    let state_dir = project.state_dir();
    let Some(mut record) = fs_err::read(sync_record_path(&state_dir, &mode_dir))
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
    // The lock is not parsed: the fingerprint covers its bytes, and the record what they name.
    let (fingerprint, listings) = sync_fingerprint(
        ctx,
        project,
        &record.generation,
        record.lock_inputs.clone(),
        &record.listings,
    );
    if fingerprint != record.fingerprint {
        tracing::debug!("sync fast path declined: inputs changed since the last full sync");
        return Ok(None);
    }
    if listings != record.listings {
        // Directories too recent to record at the last full sync are old enough now, or the cache
        // entries' directories moved (another project published): recorded, so the next no-op
        // sync does not list or read them again.
        record.listings = listings;
        if let Err(error) = write_record(&record, &state_dir, &mode_dir) {
            tracing::debug!("the fast-path record keeps its listings: {error:#}");
        }
    }
    // Unverified or mirrored packages: parse the lock to say so, as the full sync does.
    let lock = if record.lock_needs_notice {
        let Ok(lock) = session.lock() else {
            return Ok(None);
        };
        if env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED)
            && lock.unverified_packages().next().is_some()
        {
            // The full sync refuses it with the documented message.
            return Ok(None);
        }
        Some(lock)
    } else {
        None
    };
    retired_homes::check_staging_root(&project.staging_root, &project.root, true)?;
    for warning in &record.package_warnings {
        output::warn(warning);
    }
    if let Some(lock) = &lock {
        pipeline::say_mirrored(ctx, lock, &project.home.root);
        pipeline::check_verified(lock)?;
    }
    // A sync the user runs ends a rollback, as the full path does.
    rollback_record::clear(&state_dir, &mode_dir);
    if let Some(home) = env::var(EnvVars::HOME) {
        if let Err(error) =
            agentpack_harness::launch::home_layer::ensure_codex_history(Path::new(&home))
        {
            output::warn(&format!("{error}"));
        }
    }
    tracing::debug!(
        "sync fast path: inputs unchanged, selecting {}",
        record.generation.display()
    );
    let mut staged = Staged::of(project, &mode_dir, pointer.path(), record.generation);
    staged.package_warnings = record.package_warnings;
    Ok(Some(staged))
}

fn verify_only(ctx: &Context, project: &Project, session: &ProjectSession) -> Result<ExitCode> {
    let mode = pipeline::resolve_mode(ctx, session.manifest())?;
    let store = session.store();
    // Checks only: a missing or changed store path is reported, never fetched or copied again.
    let outcome = session
        .resolve(&ResolvePolicy::VerifyOnly, None)
        .inspect_err(|_| forget_fast_path(project, &mode.dir))?;
    let lock = &outcome.lock;
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
    pipeline::check_verified(lock)?;
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
    let diff = staged::check_staged(store, &generation, pointer.path())?;
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
    let mode = pipeline::resolve_mode(ctx, &manifest)?;
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
    // The whole plan when nothing has to be resolved or fetched first (and the store exists:
    // a dry run never creates one).
    let plan = if actions.len() == 1 && cache.join("store").is_dir() {
        dry_run_plan(ctx, project, &mode)?
    } else {
        None
    };
    if ctx.json {
        output::json(&serde_json::json!({
            "dry_run": true,
            "mode": mode.name,
            "actions": actions,
            "plan": plan,
        }))?;
    } else {
        let mut text = String::new();
        for action in actions {
            text.push_str(&format!("{action}\n"));
        }
        if let Some(plan) = &plan {
            text.push_str(&describe_plan(plan));
        }
        output::stdout(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The plan of the mode from the lock and the store as they are, when every package verifies;
/// `None` (with the reason at `-v`) otherwise.
fn dry_run_plan(
    ctx: &Context,
    project: &Project,
    mode: &agentpack_builders::project::ResolvedMode,
) -> Result<Option<agentpack_builders::project::Plan>> {
    let session = pipeline::open(project)?;
    let resolved = session.resolve(&ResolvePolicy::VerifyOnly, None)?;
    if !resolved.problems.is_empty() {
        tracing::debug!("dry run: no plan, some packages are not in the store as locked");
        return Ok(None);
    }
    let plan = session.plan(&resolved, mode, &Agent::ALL, &pipeline::plan_options(ctx)?);
    // What reading the inputs said belongs to the plan's report, not to this run's stderr.
    let _ = session.take_warnings();
    Ok(Some(plan?))
}

/// A plan for people: the files per agent, collisions, what rendering would report, MCP servers
/// and workspace writes.
fn describe_plan(plan: &agentpack_builders::project::Plan) -> String {
    let mut text = format!("would stage generation {}:\n", plan.generation);
    for (agent, files) in &plan.files {
        text.push_str(&format!("  {agent}: {} file(s)\n", files.len()));
    }
    for collision in &plan.collisions {
        let (agent, clash, path) = (&collision.agent, &collision.clash, &collision.path);
        let (kept_by, from, to) = (
            &collision.kept_by,
            &collision.renamed_from,
            &collision.renamed_to,
        );
        text.push_str(&format!(
            "  collision ({agent}) {clash} {path}: {kept_by} keeps it, {from} is staged as {to}\n"
        ));
    }
    for warning in &plan.warnings {
        text.push_str(&format!("  would warn: {warning}\n"));
    }
    for server in &plan.mcp_servers {
        text.push_str(&format!(
            "  MCP server {} ({})\n",
            server.name, server.source
        ));
    }
    for (agent, writes) in &plan.workspace_writes {
        text.push_str(&format!(
            "  a launch of {agent} writes in the workspace: {}\n",
            writes.join(", ")
        ));
    }
    text
}
