//! The binary's side of the pipeline (`agentpack_builders::project`): it opens the one
//! [`ProjectSession`] of a command from the project's roots and the environment, and says what
//! the steps report (warnings, pins that moved, mirrored packages) the way every command says it.
//!
//! The steps themselves (resolve, plan, build, select) are the library's; [`stage`] holds their
//! compositions that several commands share (a sync, a launcher's staging, `env restore`'s frozen
//! staging, the MCP records of a relock), and [`fingerprint`] what the fast paths compare. No command
//! module calls another for any of this: they all come here. Preflight and probe open theirs with
//! [`open_read_only`].

pub mod edit;
pub mod fingerprint;
pub mod stage;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agentpack_builders::project::{PlanOptions, ProjectRoots, ProjectSession, ResolvedMode};
use agentpack_harness::{Agent, SecretLayer};
use agentpack_lockfile::{Lockfile, Manifest, DEFAULT_MODE};
use anyhow::{bail, Context as _, Result};

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::project::{FilesSnapshot, Project};

/// What a sync selected: everything a launcher needs.
#[derive(Debug)]
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

impl Staged {
    /// `generation` of `project`'s mode directory `mode_dir`, selected by `pointer`.
    pub fn of(project: &Project, mode_dir: &str, pointer: &Path, generation: PathBuf) -> Staged {
        Staged {
            project_root: project.root.clone(),
            project_hash: project.hash.clone(),
            agentpack_home: project.home.root.clone(),
            staging_root: project.staging_root.clone(),
            mode_dir: mode_dir.to_owned(),
            pointer: pointer.to_path_buf(),
            generation,
            state_dir: project.state_dir(),
            secrets: BTreeMap::new(),
            package_warnings: Vec::new(),
        }
    }
}

/// The roots of `project` as the library names them.
pub fn roots(project: &Project) -> ProjectRoots {
    ProjectRoots {
        definition: project.root.clone(),
        workspace: project.workspace.clone(),
        project_hash: project.hash.clone(),
        agentpack_home: project.home.root.clone(),
        staging_root: project.staging_root.clone(),
    }
}

/// Opens this command's session: reads `agentpack.toml` and `pack.lock` once and opens the store
/// once; the GitHub session is made (from the environment) when a step first needs it.
pub fn open(project: &Project) -> Result<ProjectSession> {
    open_with_store(project, crate::session::open_store(&project.home)?)
}

/// [`open`] over a store this command already opened (a launcher holds its lease through it).
pub fn open_with_store(
    project: &Project,
    store: std::sync::Arc<agentpack_store::Store>,
) -> Result<ProjectSession> {
    let session = ProjectSession::open(
        roots(project),
        store,
        Box::new(|store| crate::session::github(store).map_err(Into::into)),
    )?;
    Ok(session)
}

/// Opens a read-only session (preflight, probe): the store read-only, nothing fetched or written
/// (see `ProjectSession::open_read_only`).
pub fn open_read_only(project: &Project) -> Result<ProjectSession> {
    let store = crate::session::open_store_read_only(&project.home)?;
    Ok(ProjectSession::open_read_only(roots(project), store)?)
}

/// The bytes of both files as `session` read them, to put back when a later step fails.
pub fn snapshot(session: &ProjectSession) -> Result<FilesSnapshot> {
    let files = session.files();
    if files.lock_exists() && files.lock_bytes().is_none() {
        // Unreadable: restoring "nothing" would delete it.
        session.lock().context("cannot read pack.lock")?;
    }
    Ok(FilesSnapshot::of(
        (
            files.manifest_path().to_path_buf(),
            Some(files.manifest_bytes().to_vec()),
        ),
        (
            files.lock_path().to_path_buf(),
            files.lock_bytes().map(<[u8]>::to_vec),
        ),
    ))
}

/// Prints every warning the session collected since the last call.
pub fn say_warnings(session: &ProjectSession) {
    for warning in session.take_warnings() {
        output::warn(&warning);
    }
}

/// What changes rendering, from the flags and the environment.
pub fn plan_options(ctx: &Context) -> Result<PlanOptions> {
    Ok(PlanOptions {
        yolo: ctx.yolo,
        keep_attribution: env::flag(EnvVars::AGENTPACK_KEEP_ATTRIBUTION),
        dot_agents: env::var(EnvVars::AGENTPACK_DOT_AGENTS).as_deref() != Some("0"),
        agentpack_exe: std::env::current_exe()
            .and_then(fs_err::canonicalize)
            .context("cannot find the path of the running agentpack executable")?,
    })
}

/// The mode this command stages.
pub fn mode_name(ctx: &Context) -> &str {
    ctx.mode.as_deref().unwrap_or(DEFAULT_MODE)
}

/// The mode this command stages, from `manifest`.
pub fn resolve_mode(ctx: &Context, manifest: &Manifest) -> Result<ResolvedMode> {
    Ok(ResolvedMode::of(manifest, mode_name(ctx))?)
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

/// Says which GitHub modules the `local/` mirror served: a mirror directory wins over the
/// network, even for a constraint it may not meet, and that must not go unnoticed. Each command
/// resolves once, so it says it once.
pub fn say_mirrored(ctx: &Context, lock: &Lockfile, agentpack_home: &Path) {
    if !ctx.says() {
        return;
    }
    for mirrored in mirrored_packages(lock, agentpack_home) {
        output::info(&format!(
            "{}: served from the local mirror {}, not from GitHub (a directory under $AGENTPACK_HOME/local/ wins over the network); remove it to fetch from GitHub",
            mirrored.module,
            mirrored.dir.display()
        ));
    }
}

/// `AGENTPACK_REQUIRE_VERIFIED` and the one-line warning for unverified packages.
pub fn check_verified(lock: &Lockfile) -> Result<()> {
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

/// The store's generation history of `project`'s mode directory `mode_dir`.
pub fn history_name(project: &Project, mode_dir: &str) -> String {
    roots(project).history_name(mode_dir)
}
