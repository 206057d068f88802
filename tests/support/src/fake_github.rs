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

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use tiny_http::{Header, Request, Response, Server};

use crate::git_repo::TestRepo;

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
    server: Arc<Server>,
    workers: Vec<JoinHandle<()>>,
    stopping: Arc<AtomicBool>,
    port: u16,
    _dir: tempfile::TempDir,
}

const WORKERS: usize = 4;

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
        let server = Arc::new(Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let shared = Arc::new(Shared {
            root,
            state: Mutex::new(State::default()),
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let workers = (0..WORKERS)
            .map(|_| {
                let server = Arc::clone(&server);
                let shared = Arc::clone(&shared);
                let stopping = Arc::clone(&stopping);
                std::thread::spawn(move || loop {
                    match server.recv() {
                        Ok(request) => handle(&shared, port, request),
                        Err(_) if stopping.load(Ordering::SeqCst) => break,
                        Err(_) => continue,
                    }
                })
            })
            .collect();
        FakeGitHub {
            shared,
            server,
            workers,
            stopping,
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

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        for _ in 0..WORKERS {
            self.server.unblock();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap()
}

fn json(status: u16, body: &serde_json::Value) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_data(serde_json::to_vec(body).unwrap())
        .with_status_code(status)
        .with_header(header("Content-Type", "application/json"))
}

fn message(status: u16, text: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    json(status, &serde_json::json!({ "message": text }))
}

fn header_value(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_owned())
}

fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| decode(v))
    })
}

fn authorized(expected: &str, authorization: Option<&str>) -> bool {
    let Some(value) = authorization else {
        return false;
    };
    if let Some(token) = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
    {
        return token == expected;
    }
    // git clients send basic auth; accept the token as password.
    if let Some(encoded) = value.strip_prefix("Basic ") {
        return base64_decode(encoded)
            .and_then(|raw| String::from_utf8(raw).ok())
            .is_some_and(|pair| pair.rsplit(':').next() == Some(expected));
    }
    false
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.trim_end_matches('=').bytes() {
        let value = ALPHABET.iter().position(|&c| c == byte)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

fn handle(shared: &Shared, port: u16, request: Request) {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let path = path.to_owned();
    let query = query.to_owned();
    let authorization = header_value(&request, "Authorization");
    {
        let mut state = shared.lock();
        state.log.push(format!("{} {url}", request.method()));
        state.authorizations.push(authorization.clone());
        if let Some(token) = &state.token {
            if !authorized(token, authorization.as_deref()) {
                drop(state);
                let response = message(401, "Requires authentication")
                    .with_header(header("WWW-Authenticate", "Basic realm=\"GitHub\""));
                let _ = request.respond(response);
                return;
            }
        }
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["repos", owner, repo, "commits", rest @ ..] if !rest.is_empty() => {
            let reference = rest.iter().map(|s| decode(s)).collect::<Vec<_>>().join("/");
            rest_call(
                shared,
                request,
                Endpoint::Commits,
                owner,
                repo,
                |repo_dir| commits(repo_dir, &reference),
            );
        }
        ["repos", owner, repo, "tags"] => {
            let (owner, repo) = (owner.to_string(), repo.to_string());
            rest_call(shared, request, Endpoint::Tags, &owner, &repo, |repo_dir| {
                tags(repo_dir, &query, port, &owner, &repo)
            });
        }
        ["repos", owner, repo, "tarball", sha] => {
            let redirect = shared.lock().redirect_tarballs;
            if redirect {
                // The redirect itself is not a download; the codeload request counts.
                let location =
                    format!("http://127.0.0.1:{port}/codeload/{owner}/{repo}/legacy.tar.gz/{sha}");
                if let Some(failure) = take_failure(shared, Endpoint::Tarball) {
                    let _ = request.respond(message(failure, "injected failure"));
                    return;
                }
                let response = Response::from_data(Vec::new())
                    .with_status_code(302)
                    .with_header(header("Location", &location));
                let _ = request.respond(response);
            } else {
                let (owner, repo, sha) = (owner.to_string(), repo.to_string(), sha.to_string());
                rest_call(
                    shared,
                    request,
                    Endpoint::Tarball,
                    &owner,
                    &repo,
                    |repo_dir| tarball(shared, repo_dir, &owner, &repo, &sha),
                );
            }
        }
        ["codeload", owner, repo, "legacy.tar.gz", sha] => {
            let (owner, repo, sha) = (owner.to_string(), repo.to_string(), sha.to_string());
            count(shared, Endpoint::Tarball, &owner, &repo);
            let response = match find_repo(shared, &owner, &repo) {
                Some(found) => tarball(shared, &found.dir, &owner, &repo, &sha),
                None => message(404, "Not Found"),
            };
            let _ = request.respond(response);
        }
        [owner, repo_git, ..] if repo_git.ends_with(".git") => {
            let repo = repo_git.trim_end_matches(".git").to_owned();
            let owner = owner.to_string();
            count(shared, Endpoint::GitHttp, &owner, &repo);
            let disabled = shared.lock().git_http_disabled;
            let found = find_repo(shared, &owner, &repo);
            match (disabled, found) {
                (false, Some(found)) => {
                    let rest = segments[2..].join("/");
                    git_http_backend(shared, request, &found, &rest, &query);
                }
                _ => {
                    let _ =
                        request.respond(Response::from_string("Not Found").with_status_code(404));
                }
            }
        }
        _ => {
            let _ = request.respond(message(404, "Not Found"));
        }
    }
}

fn count(shared: &Shared, endpoint: Endpoint, owner: &str, repo: &str) {
    *shared
        .lock()
        .counters
        .entry((endpoint, key(owner, repo)))
        .or_insert(0) += 1;
}

fn find_repo(shared: &Shared, owner: &str, repo: &str) -> Option<TestRepo> {
    shared.lock().repos.get(&key(owner, repo)).cloned()
}

fn take_failure(shared: &Shared, endpoint: Endpoint) -> Option<u16> {
    let mut state = shared.lock();
    if let Some(status) = state.rest_down.filter(|_| endpoint.is_rest()) {
        return Some(status);
    }
    let rule = state.fail_rules.iter_mut().find(|rule| {
        rule.remaining > 0 && rule.endpoint.map_or(endpoint.is_rest(), |e| e == endpoint)
    })?;
    rule.remaining -= 1;
    Some(rule.status)
}

fn rest_call(
    shared: &Shared,
    request: Request,
    endpoint: Endpoint,
    owner: &str,
    repo: &str,
    answer: impl FnOnce(&Path) -> Response<std::io::Cursor<Vec<u8>>>,
) {
    count(shared, endpoint, owner, repo);
    if let Some(status) = take_failure(shared, endpoint) {
        let mut response = message(status, "injected failure");
        if status == 429 {
            response = response.with_header(header("Retry-After", "0"));
        }
        let _ = request.respond(response);
        return;
    }
    let response = match find_repo(shared, owner, repo) {
        Some(found) => answer(&found.dir),
        None => message(404, "Not Found"),
    };
    let _ = request.respond(response);
}

fn git_output(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then_some(output.stdout)
}

fn commits(repo_dir: &Path, reference: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    if reference.starts_with('-') {
        return message(422, "No commit found for SHA");
    }
    match git_output(
        repo_dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{reference}^{{commit}}"),
        ],
    ) {
        Some(out) => {
            let sha = String::from_utf8_lossy(&out).trim().to_owned();
            json(
                200,
                &serde_json::json!({ "sha": sha, "commit": { "message": "" } }),
            )
        }
        None => message(422, &format!("No commit found for SHA: {reference}")),
    }
}

fn tags(
    repo_dir: &Path,
    query: &str,
    port: u16,
    owner: &str,
    repo: &str,
) -> Response<std::io::Cursor<Vec<u8>>> {
    let per_page = query_param(query, "per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page = query_param(query, "page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let listing = git_output(
        repo_dir,
        &[
            "for-each-ref",
            "--sort=-refname",
            "--format=%(refname:strip=2)%09%(*objectname)%09%(objectname)",
            "refs/tags",
        ],
    )
    .unwrap_or_default();
    let all: Vec<serde_json::Value> = String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|line| {
            let mut parts = line.split('\t');
            let name = parts.next()?;
            let peeled = parts.next().unwrap_or("");
            let direct = parts.next().unwrap_or("");
            let sha = if peeled.is_empty() { direct } else { peeled };
            Some(serde_json::json!({ "name": name, "commit": { "sha": sha } }))
        })
        .collect();
    let start = (page - 1) * per_page;
    let slice: Vec<_> = all.iter().skip(start).take(per_page).cloned().collect();
    let mut response = json(200, &serde_json::Value::Array(slice));
    if start + per_page < all.len() {
        let next = format!(
            "<http://127.0.0.1:{port}/repos/{owner}/{repo}/tags?per_page={per_page}&page={}>; rel=\"next\"",
            page + 1
        );
        response = response.with_header(header("Link", &next));
    }
    response
}

fn tarball(
    shared: &Shared,
    repo_dir: &Path,
    owner: &str,
    repo: &str,
    sha: &str,
) -> Response<std::io::Cursor<Vec<u8>>> {
    let override_bytes = shared
        .lock()
        .overrides
        .get(&(key(owner, repo), sha.to_owned()))
        .cloned();
    if let Some(bytes) = override_bytes {
        return Response::from_data(bytes)
            .with_header(header("Content-Type", "application/x-gzip"));
    }
    let full = match git_output(
        repo_dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{sha}^{{commit}}"),
        ],
    ) {
        Some(out) => String::from_utf8_lossy(&out).trim().to_owned(),
        None => return message(404, "Not Found"),
    };
    let short: String = full.chars().take(7).collect();
    let canonical = find_repo(shared, owner, repo);
    let (owner_name, repo_name) = canonical
        .map(|r| (r.owner, r.name))
        .unwrap_or((owner.to_owned(), repo.to_owned()));
    let prefix = format!("--prefix={owner_name}-{repo_name}-{short}/");
    let tampered = shared
        .lock()
        .tampered
        .contains(&(key(owner, repo), sha.to_owned()));
    // `--add-virtual-file` paths are not prefixed by `--prefix`: name the top-level directory.
    let virtual_file =
        format!("--add-virtual-file={owner_name}-{repo_name}-{short}/TAMPERED:tampered\n");
    let mut args = vec!["archive", "--format=tar.gz", prefix.as_str()];
    if tampered {
        args.push(virtual_file.as_str());
    }
    args.push(full.as_str());
    match git_output(repo_dir, &args) {
        Some(bytes) => {
            Response::from_data(bytes).with_header(header("Content-Type", "application/x-gzip"))
        }
        None => message(500, "git archive failed"),
    }
}

fn git_http_backend(
    shared: &Shared,
    mut request: Request,
    repo: &TestRepo,
    rest: &str,
    query: &str,
) {
    let mut body = Vec::new();
    if request.as_reader().read_to_end(&mut body).is_err() {
        let _ = request.respond(Response::from_string("bad request").with_status_code(400));
        return;
    }
    let path_info = format!("/{}/{}.git/{rest}", repo.owner, repo.name);
    let mut command = Command::new("git");
    command
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", request.method().as_str())
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(content_type) = header_value(&request, "Content-Type") {
        command.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = header_value(&request, "Git-Protocol") {
        command.env("GIT_PROTOCOL", protocol);
    }
    if let Some(encoding) = header_value(&request, "Content-Encoding") {
        command.env("HTTP_CONTENT_ENCODING", encoding);
    }
    let Ok(mut child) = command.spawn() else {
        let _ = request
            .respond(Response::from_string("cannot run git http-backend").with_status_code(500));
        return;
    };
    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(&body);
        }
    });
    let output = child.wait_with_output();
    let _ = writer.join();
    let Ok(output) = output else {
        let _ =
            request.respond(Response::from_string("git http-backend failed").with_status_code(500));
        return;
    };
    let raw = output.stdout;
    let (head_end, body_start) = match find(&raw, b"\r\n\r\n") {
        Some(i) => (i, i + 4),
        None => match find(&raw, b"\n\n") {
            Some(i) => (i, i + 2),
            None => (raw.len(), raw.len()),
        },
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut status = 200;
    let mut headers = Vec::new();
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("Status") {
            status = value
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(500);
        } else {
            headers.push(header(name.trim(), value));
        }
    }
    let mut response = Response::from_data(raw[body_start..].to_vec()).with_status_code(status);
    for h in headers {
        response = response.with_header(h);
    }
    let _ = request.respond(response);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
