//! The pipeline every project command composes, as a library: one [`ProjectSession`] per process
//! holds the project's roots, ONE store handle, at most one GitHub session (made on first use), the
//! manifest and the lock as read once, and the warnings every step collects. Its steps:
//!
//! ```text
//! resolve(policy)              manifest + lock + sources -> Resolved  (lock, verified package slots)
//! plan(resolved, mode, agents) Resolved + overlay        -> Plan      (pure: nothing is written)
//! build(plan)                  Plan                      -> Generation (an input-addressed store path)
//! select(mode, generation)     Generation                -> the pointer <staging-root>/modes/<mode>
//! ```
//!
//! `sync` is all four; `sync --dry-run` and the conversion report stop after [`ProjectSession::plan`];
//! `env restore` is a frozen [`ResolvePolicy`] then build and select; a launch plans and builds
//! only its own agent.
//!
//! Preflight and probe open a read-only session ([`ProjectSession::open_read_only`], over
//! `Store::open_read_only`): it resolves only with [`ResolvePolicy::Inspect`] (the lock as it
//! is, each cache entry checked, nothing fetched, repaired or rewritten: an entry that is not
//! usable is data, [`EntryCheck`]) and plans with the same pure [`ProjectSession::plan`] sync
//! uses; everything that writes (the other policies, downloads, `save_*`, build, select) is
//! refused with [`PipelineError::ReadOnly`].
//!
//! Owns: reading `agentpack.toml` and `pack.lock` (once, see [`files`]), the order of the steps and
//! what each hands on. Never prints (warnings are returned by [`ProjectSession::take_warnings`]),
//! never reads an environment variable (the cli passes [`PlanOptions`] and the GitHub session
//! factory), never re-reads a file a step already read (the package trees included: one listing
//! per package per session).

pub mod build;
pub mod files;
pub mod inputs;
pub mod mode;
pub mod plan;
pub mod resolve;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use agentpack_lockfile::{LockError, Lockfile, Manifest, ManifestDocument, ManifestError};
use agentpack_store::Store;

use crate::session::GitHubSession;
use crate::warnings::{Once, WarningList};

pub use build::{Generation, Selected};
pub use files::ProjectFiles;
pub use mode::ResolvedMode;
pub use plan::{Plan, PlanOptions, PlannedInputs};
pub use resolve::{EntryCheck, ResolvePolicy, Resolved};

/// Where one project's things are, resolved by the cli from its flags and environment.
#[derive(Debug, Clone)]
pub struct ProjectRoots {
    /// The definition root: `agentpack.toml`, `pack.lock`; path dependencies are relative to it.
    pub definition: PathBuf,
    /// The checkout: its `./.agents/` overlay is staged, workspace writes go there.
    pub workspace: PathBuf,
    /// The project hash (see the cli's `project` module): names the state directory and the
    /// generation history.
    pub project_hash: String,
    /// `$AGENTPACK_HOME`.
    pub agentpack_home: PathBuf,
    /// `<staging-root>`: the mode pointers live in `<staging-root>/modes/`.
    pub staging_root: PathBuf,
}

impl ProjectRoots {
    /// `<definition>/agentpack.toml`.
    pub fn manifest_path(&self) -> PathBuf {
        self.definition.join(files::MANIFEST_FILE)
    }

    /// `<definition>/pack.lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.definition.join(files::LOCK_FILE)
    }

    /// `$AGENTPACK_HOME/projects/<hash>`: the project's mutable state.
    pub fn state_dir(&self) -> PathBuf {
        self.agentpack_home
            .join("projects")
            .join(&self.project_hash)
    }

    /// The store's generation history of this project and `mode_dir`.
    pub fn history_name(&self, mode_dir: &str) -> String {
        format!("{}/{mode_dir}", self.project_hash)
    }
}

/// Why a pipeline step failed. Each variant names what it was doing; the cause is its `source`
/// (boxed: the causes are large and the error path is rare).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Manifest(Box<ManifestError>),
    #[error(transparent)]
    Lock(Box<LockError>),
    #[error(transparent)]
    Edit(Box<agentpack_lockfile::EditError>),
    #[error(transparent)]
    Files(Box<files::FilesError>),
    #[error(
        "mode `{name}` is not declared in agentpack.toml (declared: {})\n  fix  create it with `agentpack mode create {name}`, or pick one with --mode",
        declared.join(", ")
    )]
    ModeNotDeclared { name: String, declared: Vec<String> },
    #[error(transparent)]
    Resolution(Box<crate::resolve::ResolutionError>),
    #[error("cannot start downloads: {0}")]
    GitHub(String),
    #[error(
        "{module} has no verified cache entry\n  fix  run `agentpack sync` again, or `agentpack sync --repair`"
    )]
    NoVerifiedEntry { module: String },
    #[error("cannot read the project overlay {}", path.display())]
    Overlay {
        path: PathBuf,
        #[source]
        source: Box<agentpack_store::StoreError>,
    },
    #[error(transparent)]
    Generation(Box<crate::generation::GenerationError>),
    #[error(transparent)]
    Store(Box<agentpack_store::StoreError>),
    #[error(transparent)]
    McpLock(Box<crate::mcp_lock::McpLockError>),
    #[error(transparent)]
    Pointer(Box<crate::generation::pointer::PointerError>),
    #[error(
        "cannot {step}: this session is read-only (preflight and probe write nothing); run `agentpack sync` to fetch, build and select"
    )]
    ReadOnly { step: &'static str },
}

macro_rules! boxed_from {
    ($($variant:ident($error:ty)),* $(,)?) => {
        $(impl From<$error> for PipelineError {
            fn from(error: $error) -> PipelineError {
                PipelineError::$variant(Box::new(error))
            }
        })*
    };
}

boxed_from!(
    Manifest(ManifestError),
    Lock(LockError),
    Edit(agentpack_lockfile::EditError),
    Files(files::FilesError),
    Resolution(crate::resolve::ResolutionError),
    Generation(crate::generation::GenerationError),
    Store(agentpack_store::StoreError),
    McpLock(crate::mcp_lock::McpLockError),
    Pointer(crate::generation::pointer::PointerError),
);

/// Makes the GitHub session the first step that needs one asks for (the cli's: it reads the
/// endpoints, tokens, limits and substituters from the environment).
pub type GitHubFactory = Box<
    dyn Fn(&Arc<Store>) -> Result<GitHubSession, Box<dyn std::error::Error + Send + Sync>>
        + Send
        + Sync,
>;

/// One process's view of one project: see the module doc.
pub struct ProjectSession {
    roots: ProjectRoots,
    store: Arc<Store>,
    make_github: GitHubFactory,
    github: OnceLock<GitHubSession>,
    files: ProjectFiles,
    manifest: Manifest,
    /// Every step's warnings, each once per session ([`Once::ForLife`]).
    warnings: WarningList,
    /// Opened with [`ProjectSession::open_read_only`].
    read_only: bool,
    /// The locked packages' listings (store paths), shared by every plan of the session: MCP
    /// definitions and rendering walk each package once.
    listings: agentpack_harness::PackageListings,
}

impl std::fmt::Debug for ProjectSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectSession")
            .field("roots", &self.roots)
            .field("github", &self.github.get().is_some())
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl ProjectSession {
    /// Reads `agentpack.toml` and `pack.lock` of `roots` (once: every later step uses these bytes)
    /// and keeps `store`. The GitHub session is made by `make_github` when a step first needs it.
    pub fn open(
        roots: ProjectRoots,
        store: Arc<Store>,
        make_github: GitHubFactory,
    ) -> Result<ProjectSession, PipelineError> {
        let files = ProjectFiles::read(&roots.manifest_path(), &roots.lock_path())?;
        let manifest = files.manifest()?;
        Ok(ProjectSession {
            roots,
            store,
            make_github,
            github: OnceLock::new(),
            files,
            manifest,
            warnings: WarningList::new(Once::ForLife),
            read_only: false,
            listings: agentpack_harness::PackageListings::default(),
        })
    }

    /// A session that writes nothing (preflight, probe): reads `agentpack.toml` and `pack.lock`
    /// once, like [`ProjectSession::open`], over `store` (a `Store::open_read_only` handle: the
    /// store itself refuses writes too). It never downloads; it resolves only with
    /// [`ResolvePolicy::Inspect`]; `save_*`, build and select are refused.
    pub fn open_read_only(
        roots: ProjectRoots,
        store: Arc<Store>,
    ) -> Result<ProjectSession, PipelineError> {
        let mut session = ProjectSession::open(
            roots,
            store,
            Box::new(|_| Err("a read-only session never downloads".into())),
        )?;
        session.read_only = true;
        Ok(session)
    }

    /// Whether this session was opened with [`ProjectSession::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// [`PipelineError::ReadOnly`] for `step` when this session is read-only.
    pub(crate) fn refuse_if_read_only(&self, step: &'static str) -> Result<(), PipelineError> {
        if self.read_only {
            return Err(PipelineError::ReadOnly { step });
        }
        Ok(())
    }

    /// The roots.
    pub fn roots(&self) -> &ProjectRoots {
        &self.roots
    }

    /// The one store handle of this process.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The manifest as read (or as last set by [`ProjectSession::set_manifest`]).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The manifest's text as an editable document (no second read).
    pub fn manifest_document(&self) -> Result<ManifestDocument, PipelineError> {
        Ok(self.files.manifest_document()?)
    }

    /// A command that edited the manifest in memory resolves and stages that edit.
    pub fn set_manifest(&mut self, manifest: Manifest) {
        self.manifest = manifest;
    }

    /// The bytes of both files as this session read them, to put back when a command fails.
    pub fn files(&self) -> &ProjectFiles {
        &self.files
    }

    /// The lock as read, or an empty one when there is no `pack.lock`. Integrity errors stop.
    pub fn lock(&self) -> Result<Lockfile, PipelineError> {
        Ok(self.files.lock()?.unwrap_or_else(|| {
            Lockfile::new(self.manifest.name.clone(), self.manifest.version.clone())
        }))
    }

    /// For `lock`: a lock that cannot be parsed is replaced, with a warning; a lock with an
    /// invalid content hash or an inconsistent entry is not (the docs' rule).
    pub fn lock_for_relock(&self) -> Result<Option<Lockfile>, PipelineError> {
        match self.files.lock() {
            Ok(lock) => Ok(lock),
            Err(err) if err.is_replaceable_by_lock() => {
                self.warn(format!(
                    "{} cannot be read and will be replaced by a lock resolved from {}:\n  {err}",
                    self.roots.lock_path().display(),
                    files::MANIFEST_FILE
                ));
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Records what a later write of the lock put there, so the session keeps describing the
    /// files as they are (a command that writes the lock, then stages, reads nothing again).
    pub fn wrote_files(&mut self, manifest: Option<&[u8]>, lock: Option<&[u8]>) {
        self.files.wrote(manifest, lock);
    }

    /// The GitHub session, made on first use.
    pub fn github(&self) -> Result<&GitHubSession, PipelineError> {
        self.refuse_if_read_only("download packages")?;
        if let Some(session) = self.github.get() {
            return Ok(session);
        }
        let session = (self.make_github)(&self.store)
            .map_err(|err| PipelineError::GitHub(err.to_string()))?;
        Ok(self.github.get_or_init(|| session))
    }

    /// Adds a warning for the cli to print. Two steps of one session that read the same input
    /// (the MCP definitions over every mode for the lock's records, then over the mode for the
    /// plan) say what they found once: a warning this session already collected is not added
    /// again. Nothing else is de-duplicated, and nothing across sessions.
    pub fn warn(&self, warning: impl Into<String>) {
        self.warn_all(std::iter::once(warning.into()));
    }

    /// Adds warnings for the cli to print (see [`ProjectSession::warn`]).
    pub fn warn_all(&self, warnings: impl IntoIterator<Item = String>) {
        self.warnings.extend(warnings);
    }

    /// Every warning collected since the last call, the store's included, in the order they came.
    pub fn take_warnings(&self) -> Vec<String> {
        let mut warnings = self.warnings.take();
        warnings.extend(self.store.take_warnings());
        warnings
    }

    /// The definition root.
    pub fn definition(&self) -> &Path {
        &self.roots.definition
    }
}
