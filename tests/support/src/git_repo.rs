//! Real git repositories for tests, driven through the `git` CLI.
//!
//! A [`TestRepo`] is a working repository whose directory is named `<repo>.git` under
//! `<root>/<owner>/`, so `git http-backend` finds it at `/<owner>/<repo>.git` and the fake GitHub reads
//! refs, tags and archives from it. Helpers panic on failure: they are test fixtures, not library code.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One git repository on disk, created by a test.
#[derive(Debug, Clone)]
pub struct TestRepo {
    /// Owner as the test named it (case kept).
    pub owner: String,
    /// Repository name as the test named it (case kept).
    pub name: String,
    /// The working directory (`<root>/<owner>/<repo>.git`).
    pub dir: PathBuf,
}

/// Runs `git` in `dir` with a fixed identity and dates, returns stdout trimmed; panics on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap_or_else(|error| panic!("cannot run git {args:?}: {error}"));
    assert!(
        output.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl TestRepo {
    /// Creates an empty repository at `<root>/<owner>/<name>.git` on branch `main`.
    pub fn init(root: &Path, owner: &str, name: &str) -> TestRepo {
        let dir = root.join(owner).join(format!("{name}.git"));
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        // Let clients fetch any commit by id, as github.com does for reachable commits.
        git(&dir, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
        git(&dir, &["config", "http.receivepack", "false"]);
        TestRepo {
            owner: owner.to_owned(),
            name: name.to_owned(),
            dir,
        }
    }

    /// Writes `contents` to the in-repo path `relative` (creating parent directories).
    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> &Self {
        let path = self.dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        self
    }

    /// Creates a symbolic link at `relative` pointing at `target`.
    pub fn symlink(&self, relative: &str, target: &str) -> &Self {
        let path = self.dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::os::unix::fs::symlink(target, &path).unwrap();
        self
    }

    /// Removes the in-repo path `relative` (file or directory).
    pub fn remove(&self, relative: &str) -> &Self {
        let path = self.dir.join(relative);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        self
    }

    /// Stages everything and commits; returns the new commit's 40-hex id.
    pub fn commit(&self, message: &str) -> String {
        git(&self.dir, &["add", "-A"]);
        git(&self.dir, &["commit", "-q", "--allow-empty", "-m", message]);
        self.head()
    }

    /// The commit `HEAD` points at.
    pub fn head(&self) -> String {
        git(&self.dir, &["rev-parse", "HEAD"])
    }

    /// Creates a lightweight tag at `HEAD`.
    pub fn tag(&self, name: &str) -> &Self {
        git(&self.dir, &["tag", name]);
        self
    }

    /// Creates an annotated tag at `HEAD`.
    pub fn annotated_tag(&self, name: &str) -> &Self {
        git(&self.dir, &["tag", "-a", name, "-m", name]);
        self
    }

    /// Creates branch `name` at `HEAD` and switches to it.
    pub fn branch(&self, name: &str) -> &Self {
        git(&self.dir, &["checkout", "-q", "-b", name]);
        self
    }

    /// Switches to an existing branch.
    pub fn switch(&self, name: &str) -> &Self {
        git(&self.dir, &["checkout", "-q", name]);
        self
    }

    /// Resolves any revision to its commit id.
    pub fn rev_parse(&self, revision: &str) -> String {
        git(&self.dir, &["rev-parse", &format!("{revision}^{{commit}}")])
    }
}
