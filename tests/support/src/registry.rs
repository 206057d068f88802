//! A real OCI registry on 127.0.0.1: Debian's `docker-registry` (the CNCF distribution registry).
//!
//! [`TestRegistry::start`] writes a config into a temp directory (storage below it, a free port on
//! 127.0.0.1, access log off), runs `docker-registry serve CONFIG`, waits until `/v2/` answers and
//! stops the process on drop. [`TestRegistry::start_with_htpasswd`] adds htpasswd (bcrypt) auth
//! for one user: requests without credentials get `401` with a `Basic` challenge.
//!
//! The binary is `/usr/bin/docker-registry` unless `AGENTPACK_TEST_DOCKER_REGISTRY` names
//! another; [`registry_available`] tells whether it is installed (`.ci/run` installs it; under CI
//! a missing binary fails the test). Tests only: panics on setup failures.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary.
pub fn registry_binary() -> PathBuf {
    std::env::var_os("AGENTPACK_TEST_DOCKER_REGISTRY")
        .map_or_else(|| PathBuf::from("/usr/bin/docker-registry"), PathBuf::from)
}

/// Whether the registry binary is installed; when it is not, the test is skipped through
/// [`crate::skip`] (which fails under CI, where `.ci/run` installs it).
pub fn registry_available() -> bool {
    let found = registry_binary().is_file();
    if !found {
        crate::skip(format!(
            "{} is not installed (apt-get install docker-registry, as .ci/run does)",
            registry_binary().display()
        ));
    }
    found
}

/// A running registry; stopped on drop.
#[derive(Debug)]
pub struct TestRegistry {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    credentials: Option<(String, String)>,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The status code of `GET /v2/`, if something answers.
fn probe(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream
        .write_all(b"GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

impl TestRegistry {
    /// An anonymous registry (pull and push without credentials).
    pub fn start() -> TestRegistry {
        TestRegistry::launch(None)
    }

    /// A registry that requires `user`/`password` (htpasswd, bcrypt) for every request.
    pub fn start_with_htpasswd(user: &str, password: &str) -> TestRegistry {
        TestRegistry::launch(Some((user.to_owned(), password.to_owned())))
    }

    fn launch(credentials: Option<(String, String)>) -> TestRegistry {
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        std::fs::create_dir_all(&storage).unwrap();
        let auth = match &credentials {
            Some((user, password)) => {
                let hash = bcrypt::hash_with_result(password, 4)
                    .unwrap()
                    .format_for_version(bcrypt::Version::TwoY);
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
                format!(
                    "auth:\n  htpasswd:\n    realm: agentpack-test\n    path: {}\n",
                    htpasswd.display()
                )
            }
            None => String::new(),
        };
        for _attempt in 0..5 {
            let port = free_port();
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  maintenance:\n    uploadpurging:\n      enabled: false\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: agentpack-test-secret\n{auth}",
                    storage.display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
            let mut child = Command::new(registry_binary())
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", registry_binary().display()));
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if matches!(probe(port), Some(200 | 401)) {
                    return TestRegistry {
                        child,
                        port,
                        dir,
                        credentials,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.path().join("registry.log")).unwrap_or_default();
        panic!("docker-registry did not start on 127.0.0.1:\n{log}");
    }

    /// `127.0.0.1:PORT`.
    pub fn registry(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `oci://127.0.0.1:PORT/<repository>`.
    pub fn repository_url(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.registry())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn http_base(&self) -> String {
        format!("http://{}", self.registry())
    }

    /// The user and password of an htpasswd registry.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }

    /// The registry's storage root (`docker/registry/v2/...` below it).
    pub fn storage_dir(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// The registry's log (errors only).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Every blob file in the storage, `sha256:<hex>` digests, sorted.
    pub fn stored_blobs(&self) -> Vec<String> {
        let root = self.storage_dir().join("docker/registry/v2/blobs/sha256");
        let mut found = Vec::new();
        collect_blobs(&root, &mut found);
        found.sort();
        found
    }
}

fn collect_blobs(dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.join("data").is_file() {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                found.push(format!("sha256:{name}"));
            }
        } else if path.is_dir() {
            collect_blobs(&path, found);
        }
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request a [`TokenAuthProxy`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRequest {
    /// `GET`, `HEAD`, `PUT`...
    pub method: String,
    /// The request target (`/v2/team/cache/blobs/sha256:...`, `/token?...`).
    pub path: String,
    /// How it authenticated: `none`, `basic` (the right user and password), `basic-wrong`,
    /// `bearer-push`, `bearer-pull`, `bearer-other`.
    pub auth: &'static str,
    /// The status the proxy answered itself (401, a token), or `None` when it was forwarded.
    pub answered: Option<u16>,
}

#[derive(Debug, Default)]
struct ProxyState {
    log: Vec<ProxiedRequest>,
    in_flight: usize,
    max_in_flight: usize,
}

/// A bearer-token front for a [`TestRegistry`], as GHCR, Docker Hub or Harbor are: every `/v2/`
/// request without a valid token gets `401` with
/// `WWW-Authenticate: Bearer realm="http://127.0.0.1:PORT/token",service="agentpack-test",scope=...`;
/// `GET /token` with HTTP basic `user:password` hands out a push+pull token, and without
/// credentials (when `anonymous_pull`) a pull-only token. Requests with a token the call allows are
/// forwarded to the registry as they are (the `Host` header kept, so upload locations name the
/// proxy). Each request is logged ([`TokenAuthProxy::requests`]); blob requests may be delayed
/// ([`TokenAuthProxy::set_blob_delay`]) so that concurrent transfers overlap visibly
/// ([`TokenAuthProxy::max_in_flight`]). Dropping it stops nothing: its thread owns the listener
/// and lingers on `accept` until the test process ends (tests only); once the [`TestRegistry`] it
/// fronts is dropped, forwarded calls fail.
#[derive(Debug)]
pub struct TokenAuthProxy {
    port: u16,
    state: std::sync::Arc<std::sync::Mutex<ProxyState>>,
    blob_delay_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

const PUSH_TOKEN: &str = "push-token-7f3a";
const PULL_TOKEN: &str = "pull-token-19c2";

impl TokenAuthProxy {
    /// A token front for `upstream` (an anonymous registry) whose token endpoint accepts
    /// `user`/`password`, and hands out pull tokens anonymously when `anonymous_pull`.
    pub fn start(
        upstream: &TestRegistry,
        user: &str,
        password: &str,
        anonymous_pull: bool,
    ) -> TokenAuthProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = std::sync::Arc::new(std::sync::Mutex::new(ProxyState::default()));
        let blob_delay_ms = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let basic = format!(
            "Basic {}",
            base64_standard(format!("{user}:{password}").as_bytes())
        );
        let upstream_port = upstream.port();
        let shared = (
            std::sync::Arc::clone(&state),
            std::sync::Arc::clone(&blob_delay_ms),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (state, delay) = (
                    std::sync::Arc::clone(&shared.0),
                    std::sync::Arc::clone(&shared.1),
                );
                let basic = basic.clone();
                std::thread::spawn(move || {
                    let _ = serve_proxied(
                        stream,
                        &ProxyConfig {
                            port,
                            upstream_port,
                            basic: &basic,
                            anonymous_pull,
                            state: &state,
                            blob_delay_ms: &delay,
                        },
                    );
                });
            }
        });
        TokenAuthProxy {
            port,
            state,
            blob_delay_ms,
        }
    }

    /// `127.0.0.1:PORT` of the proxy.
    pub fn registry(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `oci://127.0.0.1:PORT/<repository>` through the proxy.
    pub fn repository_url(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.registry())
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<ProxiedRequest> {
        self.state.lock().unwrap().log.clone()
    }

    /// Forgets the log and the in-flight maximum.
    pub fn reset(&self) {
        let mut state = self.state.lock().unwrap();
        state.log.clear();
        state.max_in_flight = 0;
    }

    /// The most forwarded blob requests that were in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.lock().unwrap().max_in_flight
    }

    /// Holds every forwarded blob request (`/blobs/`) this long before forwarding it.
    pub fn set_blob_delay(&self, delay: Duration) {
        self.blob_delay_ms.store(
            u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::SeqCst,
        );
    }
}

struct ProxyConfig<'a> {
    port: u16,
    upstream_port: u16,
    basic: &'a str,
    anonymous_pull: bool,
    state: &'a std::sync::Mutex<ProxyState>,
    blob_delay_ms: &'a std::sync::atomic::AtomicU64,
}

/// Standard base64 with padding (HTTP basic credentials, docker `config.json` `auth` values).
pub fn base64_standard(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Reads one request head (through the blank line) byte by byte, so nothing of the body is
/// consumed.
fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
        if head.len() > 64 * 1024 {
            return None;
        }
    }
    Some(head)
}

fn answer(stream: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &str) {
    let mut text = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.flush();
}

fn serve_proxied(mut client: TcpStream, config: &ProxyConfig<'_>) -> std::io::Result<()> {
    let Some(head) = read_head(&mut client) else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let authorization = lines
        .clone()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("authorization")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    let auth: &'static str = if authorization.is_empty() {
        "none"
    } else if authorization == config.basic {
        "basic"
    } else if authorization.starts_with("Basic ") {
        "basic-wrong"
    } else if authorization == format!("Bearer {PUSH_TOKEN}") {
        "bearer-push"
    } else if authorization == format!("Bearer {PULL_TOKEN}") {
        "bearer-pull"
    } else {
        "bearer-other"
    };
    let log = |answered: Option<u16>| {
        config.state.lock().unwrap().log.push(ProxiedRequest {
            method: method.clone(),
            path: path.clone(),
            auth,
            answered,
        });
    };
    if path.starts_with("/token") {
        let token = match auth {
            "basic" => Some(PUSH_TOKEN),
            // Anonymous callers get a pull-only token whatever scope they ask for.
            "none" if config.anonymous_pull => Some(PULL_TOKEN),
            _ => None,
        };
        match token {
            Some(token) => {
                log(Some(200));
                answer(
                    &mut client,
                    "200 OK",
                    &[("Content-Type", "application/json".to_owned())],
                    &format!(
                        "{{\"token\":\"{token}\",\"access_token\":\"{token}\",\"expires_in\":300}}"
                    ),
                );
            }
            None => {
                log(Some(401));
                answer(
                    &mut client,
                    "401 Unauthorized",
                    &[],
                    "{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"bad credentials\"}]}",
                );
            }
        }
        return Ok(());
    }
    let reads = method == "GET" || method == "HEAD";
    let allowed = auth == "bearer-push" || (auth == "bearer-pull" && reads);
    if !allowed {
        log(Some(401));
        let name = path
            .strip_prefix("/v2/")
            .and_then(|rest| {
                ["/manifests/", "/blobs/", "/tags/"]
                    .iter()
                    .find_map(|marker| rest.split_once(marker).map(|(name, _)| name.to_owned()))
            })
            .unwrap_or_default();
        let scope = if name.is_empty() {
            String::new()
        } else {
            format!(",scope=\"repository:{name}:pull,push\"")
        };
        let challenge = format!(
            "Bearer realm=\"http://127.0.0.1:{}/token\",service=\"agentpack-test\"{scope}",
            config.port
        );
        let code = if auth == "bearer-pull" {
            "DENIED"
        } else {
            "UNAUTHORIZED"
        };
        let status = if auth == "bearer-pull" {
            "403 Forbidden"
        } else {
            "401 Unauthorized"
        };
        answer(
            &mut client,
            status,
            &[
                ("WWW-Authenticate", challenge),
                ("Content-Type", "application/json".to_owned()),
            ],
            &format!(
                "{{\"errors\":[{{\"code\":\"{code}\",\"message\":\"authentication required\"}}]}}"
            ),
        );
        return Ok(());
    }
    log(None);
    let blob = path.contains("/blobs/");
    if blob {
        let mut state = config.state.lock().unwrap();
        state.in_flight += 1;
        state.max_in_flight = state.max_in_flight.max(state.in_flight);
    }
    let delay = config
        .blob_delay_ms
        .load(std::sync::atomic::Ordering::SeqCst);
    if blob && delay > 0 {
        std::thread::sleep(Duration::from_millis(delay));
    }
    // Forward with `Connection: close`: one request per upstream connection.
    let mut forwarded = String::new();
    forwarded.push_str(&request_line);
    forwarded.push_str("\r\n");
    for line in text.split("\r\n").skip(1) {
        if line.is_empty() {
            continue;
        }
        let name = line.split(':').next().unwrap_or_default();
        if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("authorization") {
            continue;
        }
        forwarded.push_str(line);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("Connection: close\r\n\r\n");
    let result = (|| {
        let mut upstream = TcpStream::connect(("127.0.0.1", config.upstream_port))?;
        upstream.write_all(forwarded.as_bytes())?;
        let mut body_reader = client.try_clone()?;
        let mut body_writer = upstream.try_clone()?;
        // The body (if any) goes up while the answer comes down.
        let up = std::thread::spawn(move || {
            let _ = std::io::copy(&mut body_reader, &mut body_writer);
        });
        std::io::copy(&mut upstream, &mut client)?;
        let _ = client.shutdown(std::net::Shutdown::Both);
        let _ = up.join();
        Ok(())
    })();
    if blob {
        config.state.lock().unwrap().in_flight -= 1;
    }
    result
}
