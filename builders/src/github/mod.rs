//! GitHub: where packages come from.
//!
//! This module owns talking to GitHub (or any server speaking the same calls, see the ADDENDUM's
//! "GitHub endpoints"): the REST client ([`rest`]), the git smart-HTTP fallback through gix
//! ([`git_protocol`]), the cached ref/tag metadata ([`metadata_cache`]) and the resolution order that
//! combines them ([`resolver`]). It never reads the environment (the cli passes a [`GitHubConfig`]),
//! never prints (warnings are returned), and never writes outside the directories it is handed.

pub mod git_protocol;
pub mod metadata_cache;
pub mod resolver;
pub mod rest;

use std::fmt;
use std::time::Duration;

use crate::limits::{LimitExceeded, Limits};

/// The public GitHub REST API, used when `AGENTPACK_GITHUB_API_URL` is unset.
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// The public GitHub web/git host, used when `AGENTPACK_GITHUB_URL` is unset.
pub const DEFAULT_GIT_URL: &str = "https://github.com";

/// How hard to retry a call that failed with 429, 5xx or a network error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub attempts: u32,
    /// Delay before the first retry; doubles each time.
    pub base_delay: Duration,
    /// Upper bound for one delay (also for a server's `Retry-After`).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// Retries quickly: for tests against a local server.
    pub fn fast() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        }
    }

    /// The delay before retry number `retry` (0-based).
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(16)).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// The attempts the policy allows (at least one), numbered from 0: each retry comes after its
    /// [`RetryPolicy::delay`] (the iterator sleeps before yielding it).
    pub fn attempts(self) -> impl Iterator<Item = u32> {
        (0..self.attempts.max(1)).inspect(move |&attempt| {
            if attempt > 0 {
                std::thread::sleep(self.delay(attempt - 1));
            }
        })
    }
}

/// Where GitHub is and how to talk to it. The cli builds it from the environment.
#[derive(Clone, PartialEq, Eq)]
pub struct GitHubConfig {
    /// REST base, no trailing `/` (`AGENTPACK_GITHUB_API_URL`).
    pub api_url: String,
    /// Git/web base, no trailing `/` (`AGENTPACK_GITHUB_URL`).
    pub git_url: String,
    /// Bearer token (`GITHUB_TOKEN`, else `GH_TOKEN`).
    pub token: Option<String>,
    /// Retry behaviour for REST calls.
    pub retry: RetryPolicy,
    /// Timeouts and size caps of every request, download and extraction.
    pub limits: Limits,
}

impl fmt::Debug for GitHubConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHubConfig")
            .field("api_url", &self.api_url)
            .field("git_url", &self.git_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.retry)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for GitHubConfig {
    fn default() -> Self {
        GitHubConfig::from_values(None, None, None, None)
    }
}

impl GitHubConfig {
    /// Builds a config from the values of `AGENTPACK_GITHUB_API_URL`, `AGENTPACK_GITHUB_URL`,
    /// `GITHUB_TOKEN` and `GH_TOKEN` (each `None` or empty when unset).
    pub fn from_values(
        api_url: Option<String>,
        git_url: Option<String>,
        github_token: Option<String>,
        gh_token: Option<String>,
    ) -> GitHubConfig {
        let non_empty = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
        GitHubConfig {
            api_url: non_empty(api_url)
                .unwrap_or_else(|| DEFAULT_API_URL.to_owned())
                .trim_end_matches('/')
                .to_owned(),
            git_url: non_empty(git_url)
                .unwrap_or_else(|| DEFAULT_GIT_URL.to_owned())
                .trim_end_matches('/')
                .to_owned(),
            token: non_empty(github_token).or_else(|| non_empty(gh_token)),
            retry: RetryPolicy::default(),
            limits: Limits::default(),
        }
    }

    /// Smart-HTTP URL of a repository: `{git_url}/{owner}/{repo}.git`.
    pub fn git_repo_url(&self, repo: &RepoId) -> String {
        format!("{}/{}/{}.git", self.git_url, repo.owner, repo.repo)
    }
}

/// A GitHub repository, as the user spelled it. Comparisons and keys use the lowercase form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoId {
    /// The owner (user or organisation).
    pub owner: String,
    /// The repository name.
    pub repo: String,
}

impl RepoId {
    /// A repository id.
    pub fn new(owner: impl Into<String>, repo: impl Into<String>) -> RepoId {
        RepoId {
            owner: owner.into(),
            repo: repo.into(),
        }
    }

    /// `owner/repo` in lowercase: the identity used for keys and de-duplication.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.owner.to_ascii_lowercase(),
            self.repo.to_ascii_lowercase()
        )
    }
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.repo)
    }
}

/// Why one source (REST or the git protocol) could not answer; the resolver then tries the next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceFailure {
    /// The source answered: no such repository, ref or commit (404/422).
    #[error("not found ({0})")]
    NotFound(String),
    /// The source refused us (401/403): missing or insufficient token, or rate limited.
    #[error(
        "access denied ({0}); set GITHUB_TOKEN or GH_TOKEN to a token that can read the repository"
    )]
    Denied(String),
    /// The source could not be reached or kept failing (429, 5xx, network) after retries.
    #[error("unavailable ({0})")]
    Unavailable(String),
    /// The source answered with more than a limit allows (an endless body, a huge tag list...).
    #[error("{0}")]
    Limit(LimitExceeded),
}

/// A 40-hex commit id in lowercase, else `None`.
pub fn full_commit(text: &str) -> Option<String> {
    (text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| text.to_ascii_lowercase())
}
