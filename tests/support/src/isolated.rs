//! Running the built `agentpack` binary in an isolated environment.
//!
//! Every run gets its own temporary `HOME`, `AGENTPACK_HOME`, `AGENTPACK_STAGING_ROOT` and XDG
//! directories, the GitHub endpoints of a [`FakeGitHub`] when one is given, and no `GITHUB_TOKEN` /
//! `GH_TOKEN`, so nothing reaches the user's real configuration or the internet.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fake_github::FakeGitHub;

/// Temporary directories for one isolated user.
#[derive(Debug)]
pub struct IsolatedHome {
    _dir: tempfile::TempDir,
    /// `$HOME`.
    pub home: PathBuf,
    /// `$AGENTPACK_HOME`.
    pub agentpack_home: PathBuf,
    /// `$AGENTPACK_STAGING_ROOT`.
    pub staging_root: PathBuf,
    /// A project directory (empty) to run commands in.
    pub project: PathBuf,
}

impl IsolatedHome {
    /// Creates the directories.
    pub fn new() -> IsolatedHome {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let home = root.join("home");
        let agentpack_home = root.join("agentpack-home");
        let staging_root = root.join("staging");
        let project = root.join("project");
        for path in [&home, &agentpack_home, &staging_root, &project] {
            std::fs::create_dir_all(path).unwrap();
        }
        IsolatedHome {
            _dir: dir,
            home,
            agentpack_home,
            staging_root,
            project,
        }
    }

    /// A command for `binary` (e.g. `assert_cmd::cargo::cargo_bin("agentpack")`) in the project
    /// directory, with a clean environment pointing at these directories and at `github` when given.
    pub fn command(&self, binary: &Path, github: Option<&FakeGitHub>) -> Command {
        let mut command = Command::new(binary);
        command.env_clear().current_dir(&self.project);
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command
            .env("HOME", &self.home)
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("AGENTPACK_HOME", &self.agentpack_home)
            .env("AGENTPACK_STAGING_ROOT", &self.staging_root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            // Never the public npm registry from a test: tests that need one serve it and override this.
            .env("npm_config_registry", "http://127.0.0.1:9/")
            .env("NO_COLOR", "1");
        match github {
            Some(github) => {
                command.env("AGENTPACK_GITHUB_API_URL", github.api_url());
                command.env("AGENTPACK_GITHUB_URL", github.git_url());
            }
            None => {
                // Never the real GitHub from a test: an address nothing listens on.
                command.env("AGENTPACK_GITHUB_API_URL", "http://127.0.0.1:9");
                command.env("AGENTPACK_GITHUB_URL", "http://127.0.0.1:9");
            }
        }
        command
    }
}

impl Default for IsolatedHome {
    fn default() -> Self {
        IsolatedHome::new()
    }
}
