//! The GitHub REST client: ref -> commit, every page of tags, and tarball downloads streamed to disk.
//!
//! Owns the HTTP side only: retries with backoff on 429, 5xx and network errors, classifies 401/403 as
//! [`SourceFailure::Denied`] and 404/422 as [`SourceFailure::NotFound`] so the resolver moves on to the
//! next source. It never caches, never holds a tarball in memory, and never prints.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use reqwest::blocking::{Client, Response};
use reqwest::StatusCode;
use serde::Deserialize;

use super::{GitHubConfig, RepoId, SourceFailure};

/// Tags requested per page (GitHub's maximum).
pub const TAGS_PER_PAGE: usize = 100;
/// Never follow more than this many tag pages (100 000 tags).
const MAX_TAG_PAGES: usize = 1000;

/// One tag as the REST API lists it, peeled to its commit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct RemoteTag {
    /// The tag name (`v1.2.3`).
    pub name: String,
    /// The commit the tag points at.
    pub commit: String,
}

#[derive(Deserialize)]
struct TagJson {
    name: String,
    commit: CommitRef,
}

#[derive(Deserialize)]
struct CommitRef {
    sha: String,
}

/// A blocking REST client for one [`GitHubConfig`].
#[derive(Debug, Clone)]
pub struct RestClient {
    config: GitHubConfig,
    http: Client,
}

impl RestClient {
    /// Builds the HTTP client (rustls, redirects followed, the configured timeout).
    pub fn new(config: GitHubConfig) -> Result<RestClient, SourceFailure> {
        let http = Client::builder()
            .user_agent(concat!("agentpack/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.timeout)
            .timeout(None::<Duration>)
            .redirect(reqwest::redirect::Policy::limited(10))
            .build()
            .map_err(|error| {
                SourceFailure::Unavailable(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(RestClient { config, http })
    }

    /// The configuration this client uses.
    pub fn config(&self) -> &GitHubConfig {
        &self.config
    }

    fn repo_url(&self, repo: &RepoId) -> String {
        format!(
            "{}/repos/{}/{}",
            self.config.api_url,
            encode(&repo.owner),
            encode(&repo.repo)
        )
    }

    /// `GET {url}` with retries; returns the first response that is neither 429, 5xx nor a network error.
    fn get(&self, url: &str, accept: &str) -> Result<Response, SourceFailure> {
        let policy = self.config.retry;
        let mut last = String::new();
        for attempt in 0..policy.attempts.max(1) {
            if attempt > 0 {
                std::thread::sleep(policy.delay(attempt - 1));
            }
            let mut request = self
                .http
                .get(url)
                .header("Accept", accept)
                .header("X-GitHub-Api-Version", "2022-11-28");
            if let Some(token) = &self.config.token {
                request = request.bearer_auth(token);
            }
            match request.send() {
                Ok(response) => {
                    let status = response.status();
                    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                        last = format!("HTTP {} from {url}", status.as_u16());
                        if let Some(wait) = retry_after(&response) {
                            std::thread::sleep(wait.min(policy.max_delay));
                        }
                        continue;
                    }
                    return classify(response, url);
                }
                Err(error) => last = format!("{url}: {}", error_chain(&error)),
            }
        }
        Err(SourceFailure::Unavailable(last))
    }

    /// Resolves a branch, tag or (short) commit to its 40-hex commit.
    pub fn commit_for_ref(&self, repo: &RepoId, reference: &str) -> Result<String, SourceFailure> {
        let encoded: Vec<String> = reference.split('/').map(encode).collect();
        let url = format!("{}/commits/{}", self.repo_url(repo), encoded.join("/"));
        let response = self.get(&url, "application/vnd.github+json")?;
        #[derive(Deserialize)]
        struct Commit {
            sha: String,
        }
        let commit: Commit = response.json().map_err(|error| {
            SourceFailure::Unavailable(format!("unexpected answer from {url}: {error}"))
        })?;
        super::full_commit(&commit.sha).ok_or_else(|| {
            SourceFailure::Unavailable(format!(
                "{url} answered with a malformed sha {:?}",
                commit.sha
            ))
        })
    }

    /// Lists every tag of `repo`, following every page.
    pub fn list_tags(&self, repo: &RepoId) -> Result<Vec<RemoteTag>, SourceFailure> {
        let mut tags = Vec::new();
        for page in 1..=MAX_TAG_PAGES {
            let url = format!(
                "{}/tags?per_page={TAGS_PER_PAGE}&page={page}",
                self.repo_url(repo)
            );
            let response = self.get(&url, "application/vnd.github+json")?;
            let has_next = response
                .headers()
                .get("link")
                .and_then(|value| value.to_str().ok())
                .map(|value| value.contains("rel=\"next\""));
            let batch: Vec<TagJson> = response.json().map_err(|error| {
                SourceFailure::Unavailable(format!("unexpected answer from {url}: {error}"))
            })?;
            let full = batch.len() >= TAGS_PER_PAGE;
            tags.extend(batch.into_iter().filter_map(|tag| {
                Some(RemoteTag {
                    name: tag.name,
                    commit: super::full_commit(&tag.commit.sha)?,
                })
            }));
            // Follow `Link: rel="next"` when the server sends it; otherwise a full page means more may follow.
            if !has_next.unwrap_or(full) {
                break;
            }
        }
        Ok(tags)
    }

    /// Downloads the tarball of `commit` into `destination` (created or truncated), streaming to disk.
    /// Returns the number of bytes written.
    pub fn download_tarball(
        &self,
        repo: &RepoId,
        commit: &str,
        destination: &Path,
    ) -> Result<u64, SourceFailure> {
        let url = format!("{}/tarball/{commit}", self.repo_url(repo));
        let policy = self.config.retry;
        let mut last = SourceFailure::Unavailable(format!("no attempt made for {url}"));
        for attempt in 0..policy.attempts.max(1) {
            if attempt > 0 {
                std::thread::sleep(policy.delay(attempt - 1));
            }
            let mut response = self.get(&url, "application/vnd.github+json")?;
            let write = (|| -> Result<u64, std::io::Error> {
                let mut file = fs_err::File::create(destination)?;
                let written = response.copy_to(&mut file).map_err(std::io::Error::other)?;
                file.flush()?;
                Ok(written)
            })();
            match write {
                Ok(written) => return Ok(written),
                Err(error) => {
                    last = SourceFailure::Unavailable(format!(
                        "downloading {url} into {}: {error}",
                        destination.display()
                    ))
                }
            }
        }
        Err(last)
    }
}

fn classify(response: Response, url: &str) -> Result<Response, SourceFailure> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let text = format!("HTTP {} from {url}", status.as_u16());
    match status {
        StatusCode::NOT_FOUND | StatusCode::UNPROCESSABLE_ENTITY => {
            Err(SourceFailure::NotFound(text))
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(SourceFailure::Denied(text)),
        _ => Err(SourceFailure::Unavailable(text)),
    }
}

fn retry_after(response: &Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC)
        .to_string()
        .replace("%2D", "-")
        .replace("%2E", ".")
        .replace("%5F", "_")
}
