//! The GitHub REST client: ref -> commit, every page of tags, and tarball downloads streamed to disk.
//!
//! Owns the HTTP side only: retries with backoff on 429, 5xx and network errors, classifies 401/403 as
//! [`SourceFailure::Denied`] and 404/422 as [`SourceFailure::NotFound`] so the resolver moves on to the
//! next source. Every request has the configured connect and read timeouts; JSON answers are read
//! with the JSON size cap, tag listings stop at the tag limit, and a tarball stops at the download
//! size cap and is removed when it fails (a [`SourceFailure::Limit`] is never retried). It never
//! caches, never holds a tarball in memory, and never prints.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use reqwest::blocking::{Client, Response};
use reqwest::StatusCode;
use serde::Deserialize;

use super::{GitHubConfig, RepoId, SourceFailure};
use crate::limits::{self, CappedReader, LimitExceeded, LimitKind};

/// Tags requested per page (GitHub's maximum).
pub const TAGS_PER_PAGE: usize = 100;

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
    /// Built at the first request (loading TLS roots costs milliseconds a command that finds
    /// everything in the cache never needs to pay), then shared by every clone.
    http: std::sync::Arc<std::sync::OnceLock<Client>>,
}

impl RestClient {
    /// A client for `config`; the HTTP client itself (rustls, redirects followed, the configured
    /// timeout) is built at the first request, whose error says when it cannot be.
    pub fn new(config: GitHubConfig) -> Result<RestClient, SourceFailure> {
        Ok(RestClient {
            config,
            http: std::sync::Arc::default(),
        })
    }

    /// The HTTP client, built on first use.
    fn http(&self) -> Result<&Client, SourceFailure> {
        if let Some(client) = self.http.get() {
            return Ok(client);
        }
        tracing::debug!("building the GitHub HTTP client");
        let config = &self.config;
        // A blocking client applies `timeout` to waiting for the response head and to each read of
        // the body: a read timeout that a stalled server trips, however long a download runs.
        let http = Client::builder()
            .user_agent(concat!("agentpack/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.limits.connect_timeout)
            .timeout(config.limits.read_timeout)
            .redirect(reqwest::redirect::Policy::limited(10))
            .build()
            .map_err(|error| {
                SourceFailure::Unavailable(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(self.http.get_or_init(|| http))
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
        for _attempt in policy.attempts() {
            let mut request = self
                .http()?
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
                Err(error) => {
                    last = format!("{url}: {}", crate::error_text::one_line(&error));
                    if error.is_timeout() {
                        last.push_str(&format!(
                            " (no answer within {}; raise {} for a slow network)",
                            self.config.limits.describe(LimitKind::ReadTimeout),
                            LimitKind::ReadTimeout.variable()
                        ));
                    }
                }
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
        let commit: Commit = self.read_json(response, &url)?;
        super::full_commit(&commit.sha).ok_or_else(|| {
            SourceFailure::Unavailable(format!(
                "{url} answered with a malformed sha {:?}",
                commit.sha
            ))
        })
    }

    /// Lists every tag of `repo`, following every page.
    pub fn list_tags(&self, repo: &RepoId) -> Result<Vec<RemoteTag>, SourceFailure> {
        let max_tags = self.config.limits.max_tags;
        let max_pages = max_tags / TAGS_PER_PAGE as u64 + 2;
        let mut tags = Vec::new();
        for page in 1.. {
            if page > max_pages {
                return Err(self.too_many_tags(repo, tags.len(), page - 1));
            }
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
            let batch: Vec<TagJson> = self.read_json(response, &url)?;
            let full = batch.len() >= TAGS_PER_PAGE;
            tags.extend(batch.into_iter().filter_map(|tag| {
                Some(RemoteTag {
                    name: tag.name,
                    commit: super::full_commit(&tag.commit.sha)?,
                })
            }));
            if tags.len() as u64 > max_tags {
                return Err(self.too_many_tags(repo, tags.len(), page));
            }
            // Follow `Link: rel="next"` when the server sends it; otherwise a full page means more may follow.
            if !has_next.unwrap_or(full) {
                break;
            }
        }
        Ok(tags)
    }

    /// Reads a JSON answer with the JSON size cap.
    fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        response: Response,
        url: &str,
    ) -> Result<T, SourceFailure> {
        let limits = &self.config.limits;
        let cap =
            LimitExceeded::too_large(limits, LimitKind::JsonSize, format!("the answer of {url}"));
        let bytes = limits::read_capped(response, limits.max_json_bytes, cap).map_err(|error| {
            match LimitExceeded::find(&error) {
                Some(limit) => SourceFailure::Limit(limit.clone()),
                None => SourceFailure::Unavailable(format!("reading the answer of {url}: {error}")),
            }
        })?;
        serde_json::from_slice(&bytes).map_err(|error| {
            SourceFailure::Unavailable(format!("unexpected answer from {url}: {error}"))
        })
    }

    fn too_many_tags(&self, repo: &RepoId, listed: usize, pages: u64) -> SourceFailure {
        SourceFailure::Limit(LimitExceeded::new(
            &self.config.limits,
            LimitKind::Tags,
            format!("the tag list of github.com/{repo}"),
            format!(
                "has more than {} tags ({listed} listed in {pages} pages, and more follow)",
                self.config.limits.max_tags
            ),
        ))
    }

    /// Downloads the tarball of `commit` into `destination` (created or truncated), streaming to disk
    /// with the download size cap; a failed download leaves no file behind.
    /// Returns the number of bytes written.
    pub fn download_tarball(
        &self,
        repo: &RepoId,
        commit: &str,
        destination: &Path,
    ) -> Result<u64, SourceFailure> {
        let url = format!("{}/tarball/{commit}", self.repo_url(repo));
        let mut last = SourceFailure::Unavailable(format!("no attempt made for {url}"));
        for _attempt in self.config.retry.attempts() {
            let response = self.get(&url, "application/vnd.github+json")?;
            let limits = &self.config.limits;
            let too_large = LimitExceeded::too_large(
                limits,
                LimitKind::DownloadSize,
                format!("the download of {url}"),
            );
            if response
                .content_length()
                .is_some_and(|length| length > limits.max_download_bytes)
            {
                return Err(SourceFailure::Limit(too_large));
            }
            let write = (|| -> Result<u64, std::io::Error> {
                let mut file = fs_err::File::create(destination)?;
                let mut body = CappedReader::new(response, limits.max_download_bytes, too_large);
                let written = std::io::copy(&mut body, &mut file)?;
                file.flush()?;
                Ok(written)
            })();
            match write {
                Ok(written) => return Ok(written),
                Err(error) => {
                    // Never leave a partial download behind.
                    let _ = std::fs::remove_file(destination);
                    if let Some(limit) = LimitExceeded::find(&error) {
                        return Err(SourceFailure::Limit(limit.clone()));
                    }
                    let what = if LimitExceeded::is_timeout(&error) {
                        format!(
                            "no bytes for {} ({})",
                            self.config.limits.describe(LimitKind::ReadTimeout),
                            LimitKind::ReadTimeout.variable()
                        )
                    } else {
                        error.to_string()
                    };
                    last = SourceFailure::Unavailable(format!(
                        "downloading {url} into {}: {what}",
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

fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC)
        .to_string()
        .replace("%2D", "-")
        .replace("%2E", ".")
        .replace("%5F", "_")
}
