//! The setting of the resolve and fetch suites: a project, an agentpack home and a real store in one
//! temporary directory, and GitHub configurations against the fake GitHub that retry without waiting.

use std::path::PathBuf;
use std::sync::Arc;

use agentpack_builders::fetch::{fetch_lock, FetchOptions, FetchOutcome};
use agentpack_builders::github::{GitHubConfig, RetryPolicy};
use agentpack_builders::resolve::{ResolutionError, ResolveEnv};
use agentpack_builders::snapshot::SnapshotFetcher;
use agentpack_lockfile::lock::Lockfile;
use agentpack_store::{Store, StoreOptions};
use agentpack_test_support::FakeGitHub;

pub struct Env {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub store: Arc<Store>,
}

/// A fresh environment: an empty project, a home, and a store under `<home>/cache`.
pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let store = Arc::new(
        Store::open(
            &home.join("cache"),
            StoreOptions {
                flush: false,
                host_id: Some("test".into()),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    Env {
        _dir: dir,
        home,
        project,
        store,
    }
}

/// The fake GitHub's REST and git URLs, retrying at once.
pub fn github_config(gh: &FakeGitHub) -> GitHubConfig {
    let mut config = GitHubConfig::from_values(Some(gh.api_url()), Some(gh.git_url()), None, None);
    config.retry = RetryPolicy::fast();
    config
}

impl Env {
    /// What `resolve` works in: this project, home and store, downloading through `fetcher`.
    pub fn resolve_env<'a>(&'a self, fetcher: &'a SnapshotFetcher) -> ResolveEnv<'a> {
        ResolveEnv {
            project_root: &self.project,
            agentpack_home: &self.home,
            fetcher,
            store: self.store.as_ref(),
            progress: None,
            keep_unhashed: false,
        }
    }

    /// `fetch_lock` of `lock` in this environment (its project, home and store).
    pub fn fetch(
        &self,
        fetcher: &SnapshotFetcher,
        lock: &Lockfile,
        options: FetchOptions,
    ) -> Result<FetchOutcome, ResolutionError> {
        fetch_lock(
            lock,
            &self.project,
            &self.home,
            fetcher,
            self.store.as_ref(),
            options,
        )
    }
}
