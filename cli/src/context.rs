//! Where things are: the project's roots, `AGENTPACK_HOME`, and output settings, resolved once per run.
//!
//! The documented defaults live here: `AGENTPACK_HOME`, else `$XDG_DATA_HOME/agentpack`, else
//! `$HOME/.local/share/agentpack`. Nothing here creates files except [`Home::ensure`].
//!
//! The roots ([`Context::roots`]): the *definition root* holds `agentpack.toml` and `pack.lock`, the
//! *workspace* is the checkout whose `.agents/` overlay is staged. `--project-root` (or the nearest
//! `agentpack.toml`) makes them one directory; `--env`, `--definition-root` and a binding made by
//! `agentpack env use` separate them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

use crate::args::GlobalArgs;
use crate::env::{self, EnvVars};

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "agentpack.toml";
/// The lockfile's file name.
pub const LOCK_FILE: &str = "pack.lock";

/// How much to say on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Warnings and errors only.
    Quiet,
    /// Normal output, without progress lines.
    NoProgress,
    /// Normal output with progress for work over a second.
    Normal,
}

/// What a command needs to know about its surroundings.
#[derive(Debug)]
pub struct Context {
    pub cwd: PathBuf,
    pub project_root_flag: Option<PathBuf>,
    /// `--definition-root`, relative to `cwd` resolved.
    pub definition_root_flag: Option<PathBuf>,
    /// `--env NAME`.
    pub env_name: Option<String>,
    pub json: bool,
    pub verbosity: Verbosity,
    pub mode: Option<String>,
    pub yolo: bool,
    /// `--strict-external`: launches and restores write nothing into the checkout.
    pub strict_external: bool,
    /// `--proxy`: run Claude Code through the diagnostics proxy.
    pub proxy: bool,
    /// `--workspace`, relative to `cwd` resolved; the launchers' default is `cwd`.
    pub workspace: Option<PathBuf>,
}

impl Context {
    pub fn new(global: &GlobalArgs) -> Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let verbosity = if global.quiet {
            Verbosity::Quiet
        } else if global.no_progress || env::flag(EnvVars::AGENTPACK_NO_PROGRESS) {
            Verbosity::NoProgress
        } else {
            Verbosity::Normal
        };
        Ok(Self {
            project_root_flag: global.project_root.as_ref().map(|dir| cwd.join(dir)),
            definition_root_flag: global.definition_root.as_ref().map(|dir| cwd.join(dir)),
            env_name: global.env_name.clone(),
            workspace: global.workspace.as_ref().map(|dir| cwd.join(dir)),
            cwd,
            json: global.json,
            verbosity,
            mode: global.mode.clone(),
            yolo: global.yolo,
            strict_external: global.strict_external,
            proxy: global.proxy,
        })
    }

    /// The directory `init` writes into: `--project-root`, else the current directory.
    pub fn init_root(&self) -> PathBuf {
        self.project_root_flag
            .clone()
            .unwrap_or_else(|| self.cwd.clone())
    }

    /// The roots of this command, and why: `--env NAME`, else `--definition-root`, else
    /// `--project-root` (one root), else the nearer of a binding made by `env use` (looked up from
    /// `--workspace`, else the current directory) and the nearest `agentpack.toml` upwards.
    pub fn roots(&self) -> Result<Roots> {
        if let Some(name) = &self.env_name {
            let home = Home::from_env()?;
            let definition = crate::environment::location::environment_dir(&home.root, name)?;
            if !definition.join(MANIFEST_FILE).is_file() {
                bail!(
                    "environment `{name}` does not exist: no {MANIFEST_FILE} in {}\n  fix  create it with `agentpack env init {name}` or `agentpack env import`; `agentpack env list` shows the ones there are",
                    definition.display()
                );
            }
            return Ok(Roots {
                definition,
                workspace: self.workspace_or_cwd(),
                source: RootsSource::EnvFlag { name: name.clone() },
            });
        }
        if let Some(definition) = &self.definition_root_flag {
            if !definition.join(MANIFEST_FILE).is_file() {
                bail!(
                    "no {MANIFEST_FILE} in {}\n  fix  pass the directory that holds the definition as --definition-root, or create one with `agentpack env init`",
                    definition.display()
                );
            }
            return Ok(Roots {
                definition: definition.clone(),
                workspace: self.workspace_or_cwd(),
                source: RootsSource::DefinitionRootFlag,
            });
        }
        if self.project_root_flag.is_some() {
            let root = self.single_root()?;
            return Ok(Roots {
                definition: root.clone(),
                workspace: root,
                source: RootsSource::ProjectRootFlag,
            });
        }
        let binding = match Home::from_env() {
            Ok(home) => {
                let start = self.workspace.as_deref().unwrap_or(&self.cwd);
                crate::environment::binding::nearest(&home.root, start)?
            }
            Err(_) => None,
        };
        let discovered = find_project_root(&self.cwd);
        let binding = binding.filter(|binding| match &discovered {
            // A nearer agentpack.toml of the current directory wins over a binding further up,
            // unless --workspace named the checkout.
            Some(root) if self.workspace.is_none() => {
                fs_err::canonicalize(root).map_or(true, |root| binding.project.starts_with(root))
            }
            _ => true,
        });
        if let Some(binding) = binding {
            if !binding.definition_root.join(MANIFEST_FILE).is_file() {
                bail!(
                    "{} is bound to environment `{}` at {}, which has no {MANIFEST_FILE}\n  fix  recreate it (`agentpack env init {}` or `env import`), or remove the binding with `agentpack env unuse --project {}`",
                    binding.project.display(),
                    binding.environment,
                    binding.definition_root.display(),
                    binding.environment,
                    binding.project.display()
                );
            }
            return Ok(Roots {
                definition: binding.definition_root.clone(),
                workspace: binding.project.clone(),
                source: RootsSource::Binding {
                    environment: binding.environment,
                    project: binding.project,
                },
            });
        }
        let root = self.single_root()?;
        Ok(Roots {
            definition: root.clone(),
            workspace: root,
            source: RootsSource::Discovered,
        })
    }

    /// `--workspace`, else the current directory.
    fn workspace_or_cwd(&self) -> PathBuf {
        self.workspace.clone().unwrap_or_else(|| self.cwd.clone())
    }

    /// The single-root project: `--project-root`, else the nearest directory upwards that has an
    /// `agentpack.toml`.
    fn single_root(&self) -> Result<PathBuf> {
        if let Some(root) = &self.project_root_flag {
            if !root.join(MANIFEST_FILE).is_file() {
                bail!(
                    "no {MANIFEST_FILE} in {}\n  fix  run `agentpack init` there, or pass the right --project-root",
                    root.display()
                );
            }
            return Ok(root.clone());
        }
        find_project_root(&self.cwd).with_context(|| {
            format!(
                "no {MANIFEST_FILE} in {} or any parent directory\n  fix  run `agentpack init` to create one, or pass --project-root",
                self.cwd.display()
            )
        })
    }

    /// Whether ordinary (non-warning) messages should be printed.
    pub fn says(&self) -> bool {
        self.verbosity != Verbosity::Quiet
    }
}

/// The roots a command works with (see [`Context::roots`]).
#[derive(Debug, Clone)]
pub struct Roots {
    /// Where `agentpack.toml`, `pack.lock` and `contract.json` are.
    pub definition: PathBuf,
    /// The checkout: its `.agents/` overlay is staged, workspace writes go there.
    pub workspace: PathBuf,
    /// Why these roots.
    pub source: RootsSource,
}

/// Why a command works with the roots it does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RootsSource {
    /// `--project-root DIR`: one root.
    ProjectRootFlag,
    /// The nearest `agentpack.toml` upwards from the current directory: one root.
    Discovered,
    /// `--definition-root DIR`.
    DefinitionRootFlag,
    /// `--env NAME`.
    EnvFlag { name: String },
    /// A binding `agentpack env use` made for the checkout `project`.
    Binding {
        environment: String,
        project: PathBuf,
    },
}

impl RootsSource {
    /// One line for people: why these roots are in force.
    pub fn describe(&self) -> String {
        match self {
            Self::ProjectRootFlag => "--project-root (one root: definition = workspace)".to_owned(),
            Self::Discovered => {
                "the nearest agentpack.toml upwards (one root: definition = workspace)".to_owned()
            }
            Self::DefinitionRootFlag => "--definition-root".to_owned(),
            Self::EnvFlag { name } => format!("--env {name}"),
            Self::Binding {
                environment,
                project,
            } => format!(
                "the binding of {} to environment `{environment}` (agentpack env use)",
                project.display()
            ),
        }
    }
}

fn find_project_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join(MANIFEST_FILE).is_file())
        .map(Path::to_path_buf)
}

/// The user-wide agentpack home.
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

impl Home {
    /// Resolves the home from the environment by the documented rules.
    pub fn from_env() -> Result<Self> {
        let root = if let Some(home) = env::var(EnvVars::AGENTPACK_HOME) {
            PathBuf::from(home)
        } else if let Some(data) = env::var(EnvVars::XDG_DATA_HOME) {
            PathBuf::from(data).join("agentpack")
        } else if let Some(home) = env::var(EnvVars::HOME) {
            PathBuf::from(home).join(".local/share/agentpack")
        } else {
            bail!("cannot find a place for agentpack's state: HOME is not set\n  fix  set AGENTPACK_HOME to a directory");
        };
        let root = if root.is_relative() {
            std::env::current_dir()
                .context("cannot read the current directory")?
                .join(root)
        } else {
            root
        };
        Ok(Self { root })
    }

    /// Creates the home directory if it does not exist yet.
    pub fn ensure(&self) -> Result<()> {
        fs_err::create_dir_all(&self.root)
            .with_context(|| format!("cannot create AGENTPACK_HOME at {}", self.root.display()))
    }
}
