//! `FakeGitHub`: a real HTTP server on 127.0.0.1 that speaks the slice of GitHub agentpack uses.
//!
//! It serves, over real git repositories the test creates ([`TestRepo`]):
//! - `GET /repos/{o}/{r}/commits/{ref}` -> `{"sha": ...}` (422 for an unknown ref, 404 for an unknown repo);
//! - `GET /repos/{o}/{r}/tags?per_page=N&page=M` -> `[{"name", "commit": {"sha"}}]`, paginated, with a
//!   `Link: <...>; rel="next"` header while more pages follow;
//! - `GET /repos/{o}/{r}/tarball/{sha}` -> `git archive` gzip tar with one top-level `{o}-{r}-{short}/`
//!   (optionally through a 302 to `/codeload/{o}/{r}/legacy.tar.gz/{sha}`);
//! - git smart HTTP at `/{o}/{r}.git/...` through `git http-backend` (protocol v2 via `Git-Protocol`).
//!
//! Knobs make endpoints fail, require a token, tamper with or replace archives; counters record how
//! often each endpoint answered for each repository. The server stops when the value is dropped.
//! It must never reach beyond 127.0.0.1 or the temporary directory it owns.
//!
//! Layout: `routing` matches requests and applies the knobs, `endpoints` answers from the git
//! repositories; this module holds the server and its knobs and counters.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tiny_http::Server;

use crate::http_serving::Serving;

use crate::git_repo::TestRepo;

mod endpoints;
mod routing;

use routing::handle;

/// The endpoints the fake serves, for counters and failure knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `GET /repos/{o}/{r}/commits/{ref}`
    Commits,
    /// `GET /repos/{o}/{r}/tags`
    Tags,
    /// `GET /repos/{o}/{r}/tarball/{sha}` (the redirect target counts here too, once per download)
    Tarball,
    /// Any git smart HTTP request under `/{o}/{r}.git/`
    GitHttp,
}

impl Endpoint {
    fn is_rest(self) -> bool {
        !matches!(self, Endpoint::GitHttp)
    }
}

#[derive(Debug)]
struct FailRule {
    endpoint: Option<Endpoint>,
    status: u16,
    remaining: usize,
}

#[derive(Debug, Default)]
struct State {
    repos: HashMap<String, TestRepo>,
    fail_rules: Vec<FailRule>,
    rest_down: Option<u16>,
    git_http_disabled: bool,
    token: Option<String>,
    redirect_tarballs: bool,
    tampered: HashSet<(String, String)>,
    overrides: HashMap<(String, String), Vec<u8>>,
    counters: HashMap<(Endpoint, String), usize>,
    authorizations: Vec<Option<String>>,
    log: Vec<String>,
}

struct Shared {
    root: PathBuf,
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A fake GitHub on 127.0.0.1; see the module docs.
pub struct FakeGitHub {
    shared: Arc<Shared>,
    // Dropped before `_dir`: every request still being answered ends before its repositories go.
    _serving: Serving,
    port: u16,
    _dir: tempfile::TempDir,
}

fn key(owner: &str, repo: &str) -> String {
    format!(
        "{}/{}",
        owner.to_ascii_lowercase(),
        repo.to_ascii_lowercase()
    )
}

impl FakeGitHub {
    /// Starts a server on a random port of 127.0.0.1.
    pub fn start() -> FakeGitHub {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repos");
        std::fs::create_dir_all(&root).unwrap();
        let server = Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let shared = Arc::new(Shared {
            root,
            state: Mutex::new(State::default()),
        });
        let serving = Serving::start(server, {
            let shared = Arc::clone(&shared);
            move |request| handle(&shared, port, request)
        });
        FakeGitHub {
            shared,
            _serving: serving,
            port,
            _dir: dir,
        }
    }

    /// Base URL of the REST API (`AGENTPACK_GITHUB_API_URL`).
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Base URL for git smart HTTP (`AGENTPACK_GITHUB_URL`).
    pub fn git_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Directory holding every served repository (`<root>/<owner>/<repo>.git`).
    pub fn repos_root(&self) -> &Path {
        &self.shared.root
    }

    /// Creates (or returns the existing) repository `owner/repo`, empty, on branch `main`.
    pub fn repo(&self, owner: &str, repo: &str) -> TestRepo {
        let mut state = self.shared.lock();
        if let Some(existing) = state.repos.get(&key(owner, repo)) {
            return existing.clone();
        }
        let created = TestRepo::init(&self.shared.root, owner, repo);
        state.repos.insert(key(owner, repo), created.clone());
        created
    }

    /// The next `times` requests to `endpoint` (any REST endpoint when `None`) answer `status`.
    pub fn fail_next(&self, endpoint: Option<Endpoint>, status: u16, times: usize) {
        self.shared.lock().fail_rules.push(FailRule {
            endpoint,
            status,
            remaining: times,
        });
    }

    /// Every REST request answers `status` until called with `None`.
    pub fn set_rest_down(&self, status: Option<u16>) {
        self.shared.lock().rest_down = status;
    }

    /// Turns git smart HTTP off (404) or back on.
    pub fn set_git_http_enabled(&self, enabled: bool) {
        self.shared.lock().git_http_disabled = !enabled;
    }

    /// Requires `Authorization: Bearer <token>` (or basic auth with it as password) on every request.
    pub fn require_token(&self, token: Option<&str>) {
        self.shared.lock().token = token.map(str::to_owned);
    }

    /// Serves tarballs through a 302 redirect to a codeload-like path.
    pub fn set_tarball_redirect(&self, redirect: bool) {
        self.shared.lock().redirect_tarballs = redirect;
    }

    /// The tarball of `sha` in `owner/repo` gains an extra file `TAMPERED` (the commit's tree is unchanged).
    pub fn tamper_tarball(&self, owner: &str, repo: &str, sha: &str) {
        self.shared
            .lock()
            .tampered
            .insert((key(owner, repo), sha.to_owned()));
    }

    /// The tarball of `sha` in `owner/repo` is exactly `gzip_bytes`.
    pub fn override_tarball(&self, owner: &str, repo: &str, sha: &str, gzip_bytes: Vec<u8>) {
        self.shared
            .lock()
            .overrides
            .insert((key(owner, repo), sha.to_owned()), gzip_bytes);
    }

    /// How many requests `endpoint` answered for `owner/repo` (any status).
    pub fn count(&self, endpoint: Endpoint, owner: &str, repo: &str) -> usize {
        self.shared
            .lock()
            .counters
            .get(&(endpoint, key(owner, repo)))
            .copied()
            .unwrap_or(0)
    }

    /// How many requests `endpoint` answered, all repositories together.
    pub fn total(&self, endpoint: Endpoint) -> usize {
        self.shared
            .lock()
            .counters
            .iter()
            .filter(|((e, _), _)| *e == endpoint)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every request seen, as `"METHOD /path?query"`, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.lock().log.clone()
    }

    /// The `Authorization` header of every request, in arrival order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.shared.lock().authorizations.clone()
    }

    /// Forgets counters and the request log.
    pub fn reset_counters(&self) {
        let mut state = self.shared.lock();
        state.counters.clear();
        state.log.clear();
        state.authorizations.clear();
    }
}
