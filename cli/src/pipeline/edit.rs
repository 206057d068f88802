//! Edits of `agentpack.toml` as transactions over the command's one session: `add`, `remove`
//! and `mcp add`/`remove` change the manifest in memory, then [`apply_manifest_edit`] resolves it
//! (once), records MCP servers, writes both files and stages what it resolved; a failure puts
//! both files back byte for byte; [`ManifestEditSession`] carries such an edit from opening the
//! project to applying it. Also the helpers those commands and `lock` share: the module a spec
//! names and the MCP lock options read from the environment.

use std::path::PathBuf;

use agentpack_builders::mcp_lock::McpLockOptions;
use agentpack_builders::project::ProjectSession;
use agentpack_builders::resolve::UpdatePolicy;
use agentpack_lockfile::{parse_spec, Lockfile, ManifestDocument, PackageSpec};
use anyhow::{bail, Result};

use crate::context::Context;
use crate::env;
use crate::project::Project;

use super::{stage, Staged};

/// The variables npm reads its registry from.
const NPM_CONFIG_REGISTRY: [&str; 2] = ["npm_config_registry", "NPM_CONFIG_REGISTRY"];

/// The module id a user's spec names.
pub fn module_of(spec: &str) -> Result<String> {
    Ok(match parse_spec(spec)? {
        PackageSpec::Github(github) => github.module.as_str().to_owned(),
        PackageSpec::Name { name, .. } => name.as_str().to_owned(),
        PackageSpec::Oci(oci) => oci.module.as_str().to_owned(),
        PackageSpec::Path(path) => {
            bail!("`{path}` is a filesystem path; name the package by its key in agentpack.toml")
        }
    })
}

/// An edit of `agentpack.toml` made in memory, for [`apply_manifest_edit`].
pub struct ManifestEdit<'a> {
    /// The edited manifest.
    pub document: &'a ManifestDocument,
    /// `--no-sync`: resolve, lock and write, but do not stage.
    pub no_sync: bool,
    /// The command as its failure names it (`add owner/repo`, `mcp remove NAME`).
    pub command: String,
}

/// One manifest edit of `add`, `remove`, `mcp add` or `mcp remove` from start to end: the project
/// of the working directory, the command's one session over it, and its manifest as a document the
/// command edits in memory before [`ManifestEditSession::apply`].
pub struct ManifestEditSession {
    /// The project found from the working directory.
    pub project: Project,
    /// The command's one session (each file read once).
    pub session: ProjectSession,
    /// `agentpack.toml` as read, edited in memory.
    pub document: ManifestDocument,
}

impl ManifestEditSession {
    /// Finds the project, opens its session and reads its manifest as an editable document.
    pub fn open(ctx: &Context) -> Result<Self> {
        let project = Project::discover(ctx)?;
        let session = super::open(&project)?;
        let document = session.manifest_document()?;
        Ok(ManifestEditSession {
            project,
            session,
            document,
        })
    }

    /// Applies the edited document with [`apply_manifest_edit`]: `no_sync` (resolve, lock and
    /// write, but do not stage), `command` (as its failure names it), `adjust` (the resolved lock).
    pub fn apply(
        mut self,
        ctx: &Context,
        no_sync: bool,
        command: String,
        adjust: impl FnOnce(&mut Lockfile) -> Result<()>,
    ) -> Result<()> {
        let edit = ManifestEdit {
            document: &self.document,
            no_sync,
            command,
        };
        apply_manifest_edit(ctx, &self.project, &mut self.session, edit, adjust)
    }
}

/// Applies an edited manifest as one transaction over `session` (which read both files once):
/// re-resolve the lock (keeping pins), let `adjust` change the resolved lock (e.g. MCP records),
/// write both files, then stage what was resolved unless `no_sync` (no second resolution: the
/// packages are fetched and verified). If any step fails, `agentpack.toml` and `pack.lock` are
/// put back exactly as they were and the error says so, naming the command.
pub fn apply_manifest_edit(
    ctx: &Context,
    project: &Project,
    session: &mut ProjectSession,
    edit: ManifestEdit<'_>,
    adjust: impl FnOnce(&mut Lockfile) -> Result<()>,
) -> Result<()> {
    let ManifestEdit {
        document,
        no_sync,
        command,
    } = edit;
    let manifest = document.to_manifest()?;
    let snapshot = super::snapshot(session)?;
    // A lock that does not verify stops the edit before anything is resolved.
    session.lock()?;
    session.set_manifest(manifest.clone());
    let result = (|| -> Result<Option<Staged>> {
        let mut resolved = stage::relock(ctx, project, session, UpdatePolicy::KeepPins, false)?;
        // New servers (e.g. of an added package) are pinned when the registry answers; an
        // unreachable registry leaves them unrecorded, with a warning, rather than failing the edit.
        let options = lock_options(false, false, true);
        stage::record_mcp_servers(ctx, session, &mut resolved, &options)?;
        adjust(&mut resolved.lock)?;
        session.save_manifest(&document.to_string(), manifest)?;
        session.save_lock(&resolved.lock, true)?;
        if no_sync {
            return Ok(None);
        }
        stage::stage_resolved(ctx, project, session, &resolved).map(Some)
    })();
    let staged = result.map_err(|err| {
        snapshot.restore();
        err.context(format!(
            "`agentpack {command}` failed; agentpack.toml and pack.lock are unchanged"
        ))
    })?;
    // After a successful sync, what a bare `agentpack sync` tidies (outside the transaction: the
    // manifest and lock are final by now).
    match staged {
        Some(staged) => stage::tidy_after_sync(ctx, session, &staged),
        None => Ok(()),
    }
}

/// The options `lock`, `add`, `sync` and `mcp add` pass to [`mcp_lock::record`], read from the
/// environment: npm on PATH and `npm_config_registry`.
pub fn lock_options(
    update: bool,
    allow_unpinned: bool,
    tolerate_unreachable: bool,
) -> McpLockOptions {
    McpLockOptions {
        update,
        allow_unpinned,
        tolerate_unreachable,
        npm: find_on_path("npm"),
        environment_registry: NPM_CONFIG_REGISTRY.iter().find_map(|name| env::var(name)),
        // An unusable limit variable is reported by the GitHub session of the same command.
        limits: env::limits().unwrap_or_default(),
    }
}

/// The first executable `name` on PATH.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
