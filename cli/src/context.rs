//! Where things are: the project root, `AGENTPACK_HOME`, and output settings, resolved once per run.
//!
//! The documented defaults live here: `AGENTPACK_HOME`, else `$XDG_DATA_HOME/agentpack`, else
//! `$HOME/.local/share/agentpack`. Nothing here creates files except [`Home::ensure`].

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
    pub json: bool,
    pub verbosity: Verbosity,
    pub mode: Option<String>,
    pub yolo: bool,
    /// `--workspace`, relative to `cwd` resolved; the launchers' default is `cwd`.
    pub workspace: Option<PathBuf>,
}

impl Context {
    pub fn new(global: &GlobalArgs) -> Result<Self> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let verbosity = if global.quiet {
            Verbosity::Quiet
        } else if global.no_progress {
            Verbosity::NoProgress
        } else {
            Verbosity::Normal
        };
        Ok(Self {
            project_root_flag: global.project_root.as_ref().map(|dir| cwd.join(dir)),
            workspace: global.workspace.as_ref().map(|dir| cwd.join(dir)),
            cwd,
            json: global.json,
            verbosity,
            mode: global.mode.clone(),
            yolo: global.yolo,
        })
    }

    /// The directory `init` writes into: `--project-root`, else the current directory.
    pub fn init_root(&self) -> PathBuf {
        self.project_root_flag
            .clone()
            .unwrap_or_else(|| self.cwd.clone())
    }

    /// The project a command works on: `--project-root`, else the nearest directory upwards that has
    /// an `agentpack.toml`.
    pub fn project_root(&self) -> Result<PathBuf> {
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
