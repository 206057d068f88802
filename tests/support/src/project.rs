//! Running the real `agentpack` binary in an [`IsolatedHome`]: one command builder, one decoded
//! result ([`Run`]) and the `run`/`ok`/`fails` trio the binary-level suites share, and
//! [`Project`], a home with its project directory and file helpers.
//!
//! The binary is the one cargo built for the calling test (`CARGO_BIN_EXE_agentpack`, which
//! `.ci/store-as-user` sets at run time for copied test binaries). Never the real GitHub or npm:
//! [`IsolatedHome::command`] points both at 127.0.0.1.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use crate::fake_github::FakeGitHub;
use crate::files;
use crate::isolated::IsolatedHome;

/// The `agentpack` binary built for this test run.
pub fn agentpack_bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("agentpack")
}

/// One finished `agentpack` run, its output decoded (lossily) as text.
#[derive(Debug)]
pub struct Run {
    /// The arguments, for messages.
    pub args: Vec<String>,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Decodes `output` of `agentpack args`.
    pub fn new<S: AsRef<OsStr>>(args: &[S], output: Output) -> Run {
        Run {
            args: args
                .iter()
                .map(|arg| arg.as_ref().to_string_lossy().into_owned())
                .collect(),
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// stdout followed by stderr.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// stdout parsed as JSON (panics with the text when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "agentpack {:?}: stdout is not JSON ({e}):\n{}",
                self.args, self.stdout
            )
        })
    }

    /// Panics, showing both streams, unless the run succeeded.
    #[track_caller]
    pub fn assert_ok(self) -> Run {
        assert!(
            self.success(),
            "agentpack {:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Panics, showing both streams, unless the run failed with nothing on stdout (a refusal
    /// speaks on stderr only).
    #[track_caller]
    pub fn assert_refused(self) -> Run {
        assert!(
            !self.success(),
            "agentpack {:?} succeeded\nstdout:\n{}\nstderr:\n{}",
            self.args,
            self.stdout,
            self.stderr
        );
        assert!(
            self.stdout.is_empty(),
            "agentpack {:?}: a refusal prints nothing on stdout, got:\n{}",
            self.args,
            self.stdout
        );
        self
    }
}

impl IsolatedHome {
    /// `agentpack args` in the project directory, isolated ([`IsolatedHome::command`]), no GitHub.
    pub fn agentpack<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut command = self.command(&agentpack_bin(), None);
        command.args(args);
        command
    }

    /// Runs `agentpack args` in the project directory.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        Run::new(args, self.agentpack(args).output().unwrap())
    }

    /// Runs `agentpack args`, asserting success.
    #[track_caller]
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.run(args).assert_ok()
    }

    /// Runs `agentpack args`, asserting a refusal (failure, empty stdout).
    #[track_caller]
    pub fn fails<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.run(args).assert_refused()
    }
}

/// An isolated home and its project directory, optionally served by a fake GitHub: the runner of the
/// binary-level suites.
pub struct Project {
    pub home: IsolatedHome,
    pub github: Option<FakeGitHub>,
}

impl Default for Project {
    fn default() -> Self {
        Project::new()
    }
}

impl Project {
    /// An empty project (no manifest) in a fresh isolated home, no GitHub.
    pub fn new() -> Project {
        Project {
            home: IsolatedHome::new(),
            github: None,
        }
    }

    /// An empty project whose runs reach `github`.
    pub fn with_github(github: FakeGitHub) -> Project {
        Project {
            home: IsolatedHome::new(),
            github: Some(github),
        }
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        &self.home.project
    }

    /// `relative` inside the project directory.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.home.project.join(relative)
    }

    /// Writes `text` at `relative` in the project (parents created); returns the path.
    pub fn write<T: AsRef<[u8]> + ?Sized>(&self, relative: &str, text: &T) -> PathBuf {
        files::write_in(&self.home.project, relative, text)
    }

    /// The text of `relative` in the project (panics naming it when unreadable).
    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative))
            .unwrap_or_else(|e| panic!("cannot read {relative} in the project: {e}"))
    }

    /// `agentpack args` in the project directory, isolated, with the GitHub when there is one.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut command = self.home.command(&agentpack_bin(), self.github.as_ref());
        command.args(args);
        command
    }

    /// Runs `agentpack args`.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        Run::new(args, self.command(args).output().unwrap())
    }

    /// Runs `agentpack args`, asserting success.
    #[track_caller]
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.run(args).assert_ok()
    }

    /// Runs `agentpack args`, asserting a refusal (failure, empty stdout).
    #[track_caller]
    pub fn fails<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.run(args).assert_refused()
    }
}
