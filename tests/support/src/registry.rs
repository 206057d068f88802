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
