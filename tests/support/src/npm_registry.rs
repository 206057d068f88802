//! A small npm registry on 127.0.0.1: packuments and real gzip tarballs made in the test.
//!
//! Serves `GET /<name>` (also `/@scope%2fname`) as a full packument and
//! `GET /<name>/-/<base>-<version>.tgz` as the tarball, every file under `package/`. Each
//! version's `dist.integrity` is the `sha512-<base64>` of the served tarball, unless a test
//! overrides it ([`NpmRegistry::set_integrity`]) or swaps the bytes served
//! ([`NpmRegistry::corrupt_tarball`]). Every request path is logged. It never reaches beyond
//! 127.0.0.1 and panics on setup failures (tests only).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use sha2::{Digest, Sha512};
use tiny_http::{Header, Response, Server};

use crate::http_serving::Serving;

/// One package version to publish.
#[derive(Debug, Clone)]
pub struct NpmPackage {
    /// Package name (`@scope/name` or `name`).
    pub name: String,
    /// Exact version.
    pub version: String,
    /// Extra fields of `package.json` (dependencies, bin, scripts, os, cpu, ...).
    pub manifest: Value,
    /// Files besides `package.json`: (path under `package/`, content, executable).
    pub files: Vec<(String, Vec<u8>, bool)>,
}

impl NpmPackage {
    /// A package with no files but `package.json`.
    pub fn new(name: &str, version: &str) -> Self {
        NpmPackage {
            name: name.to_owned(),
            version: version.to_owned(),
            manifest: json!({}),
            files: Vec::new(),
        }
    }

    /// Adds `dependencies.<name> = <range>`.
    pub fn dependency(mut self, name: &str, range: &str) -> Self {
        let object = self.manifest.as_object_mut().unwrap();
        let deps = object.entry("dependencies").or_insert_with(|| json!({}));
        deps[name] = json!(range);
        self
    }

    /// Sets a `package.json` field.
    pub fn field(mut self, key: &str, value: Value) -> Self {
        self.manifest[key] = value;
        self
    }

    /// Adds a file.
    pub fn file(mut self, path: &str, content: &str, executable: bool) -> Self {
        self.files
            .push((path.to_owned(), content.as_bytes().to_vec(), executable));
        self
    }

    /// Adds the executable `cli.js` with `script` and names it the package's one bin, `bin`
    /// (what an MCP server package launched by `npx` ships).
    pub fn bin_script(self, bin: &str, script: &str) -> Self {
        self.field("bin", json!({ bin: "cli.js" }))
            .file("cli.js", script, true)
    }

    /// The full `package.json`.
    pub fn package_json(&self) -> Value {
        let mut value = self.manifest.clone();
        value["name"] = json!(self.name);
        value["version"] = json!(self.version);
        value
    }

    /// The `.tgz` bytes (deterministic).
    pub fn tarball(&self) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut add = |path: &str, bytes: &[u8], mode: u32| {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(mode);
            header.set_mtime(499_162_500);
            header.set_entry_type(tar::EntryType::Regular);
            builder
                .append_data(&mut header, format!("package/{path}"), bytes)
                .unwrap();
        };
        let package_json = serde_json::to_vec_pretty(&self.package_json()).unwrap();
        add("package.json", &package_json, 0o644);
        for (path, bytes, exec) in &self.files {
            add(path, bytes, if *exec { 0o755 } else { 0o644 });
        }
        let tar = builder.into_inner().unwrap();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&tar).unwrap();
        encoder.finish().unwrap()
    }
}

/// `sha512-<base64>` of `bytes`, the npm SRI form.
pub fn sri_sha512(bytes: &[u8]) -> String {
    format!("sha512-{}", base64(&Sha512::digest(bytes)))
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[derive(Default)]
struct Published {
    package: Option<NpmPackage>,
    tarball: Vec<u8>,
    served: Option<Vec<u8>>,
    integrity: Option<String>,
}

#[derive(Default)]
struct State {
    /// name -> version -> published
    packages: BTreeMap<String, BTreeMap<String, Published>>,
    tags: BTreeMap<String, BTreeMap<String, String>>,
    log: Vec<String>,
}

/// The registry; see the module docs.
pub struct NpmRegistry {
    state: Arc<Mutex<State>>,
    _serving: Serving,
    port: u16,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl NpmRegistry {
    /// Starts an empty registry on a random port of 127.0.0.1.
    pub fn start() -> NpmRegistry {
        let server = Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let serving = Serving::start(server, {
            let state = Arc::clone(&state);
            move |request| handle(&state, port, request)
        });
        NpmRegistry {
            state,
            _serving: serving,
            port,
        }
    }

    /// The registry URL (what `npm_config_registry` would hold), without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Publishes a version; the first version of a name, and every later one, becomes `latest`.
    pub fn publish(&self, package: NpmPackage) -> &Self {
        let mut state = lock(&self.state);
        let tarball = package.tarball();
        state
            .tags
            .entry(package.name.clone())
            .or_default()
            .insert("latest".into(), package.version.clone());
        state
            .packages
            .entry(package.name.clone())
            .or_default()
            .insert(
                package.version.clone(),
                Published {
                    package: Some(package),
                    tarball,
                    served: None,
                    integrity: None,
                },
            );
        self
    }

    /// Points a dist-tag at a version.
    pub fn set_tag(&self, name: &str, tag: &str, version: &str) {
        lock(&self.state)
            .tags
            .entry(name.to_owned())
            .or_default()
            .insert(tag.to_owned(), version.to_owned());
    }

    /// The integrity the registry reports for a version (by default the real one).
    pub fn integrity(&self, name: &str, version: &str) -> String {
        let state = lock(&self.state);
        let published = &state.packages[name][version];
        published
            .integrity
            .clone()
            .unwrap_or_else(|| sri_sha512(&published.tarball))
    }

    /// Makes the packument report `integrity` for a version (a registry that changed it).
    pub fn set_integrity(&self, name: &str, version: &str, integrity: &str) {
        let mut state = lock(&self.state);
        if let Some(p) = state
            .packages
            .get_mut(name)
            .and_then(|v| v.get_mut(version))
        {
            p.integrity = Some(integrity.to_owned());
        }
    }

    /// Serves other bytes for a version's tarball while the packument keeps the real integrity.
    pub fn corrupt_tarball(&self, name: &str, version: &str) {
        let mut state = lock(&self.state);
        if let Some(p) = state
            .packages
            .get_mut(name)
            .and_then(|v| v.get_mut(version))
        {
            let mut bytes = p.tarball.clone();
            if let Some(last) = bytes.last_mut() {
                *last ^= 0xff;
            }
            p.served = Some(bytes);
        }
    }

    /// Serves the real tarball again.
    pub fn restore_tarball(&self, name: &str, version: &str) {
        let mut state = lock(&self.state);
        if let Some(p) = state
            .packages
            .get_mut(name)
            .and_then(|v| v.get_mut(version))
        {
            p.served = None;
        }
    }

    /// Every request path so far.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).log.clone()
    }

    /// How many tarball downloads so far.
    pub fn tarball_requests(&self) -> usize {
        lock(&self.state)
            .log
            .iter()
            .filter(|p| p.ends_with(".tgz"))
            .count()
    }
}

/// A URL on 127.0.0.1 where nothing listens (an unreachable registry).
pub fn unreachable_registry_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

fn unscoped(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

fn handle(state: &Mutex<State>, port: u16, request: tiny_http::Request) {
    let raw = request.url().split('?').next().unwrap_or("").to_owned();
    let path = percent_encoding::percent_decode_str(&raw)
        .decode_utf8_lossy()
        .into_owned();
    let mut guard = lock(state);
    guard.log.push(path.clone());
    let base = format!("http://127.0.0.1:{port}");
    let json_header = Header::from_bytes("Content-Type", "application/json").unwrap();
    let trimmed = path.trim_start_matches('/');
    if let Some((name, file)) = trimmed.split_once("/-/") {
        let body = guard.packages.get(name).and_then(|versions| {
            versions.iter().find_map(|(version, p)| {
                (file == format!("{}-{version}.tgz", unscoped(name)))
                    .then(|| p.served.clone().unwrap_or_else(|| p.tarball.clone()))
            })
        });
        drop(guard);
        let response = match body {
            Some(bytes) => Response::from_data(bytes)
                .with_header(
                    Header::from_bytes("Content-Type", "application/octet-stream").unwrap(),
                )
                .boxed(),
            None => Response::from_string("not found")
                .with_status_code(404)
                .boxed(),
        };
        let _ = request.respond(response);
        return;
    }
    let Some(versions) = guard.packages.get(trimmed) else {
        drop(guard);
        let _ = request.respond(
            Response::from_string(r#"{"error":"Not found"}"#)
                .with_status_code(404)
                .with_header(json_header),
        );
        return;
    };
    let mut version_map = serde_json::Map::new();
    for (version, published) in versions {
        let Some(package) = &published.package else {
            continue;
        };
        let mut doc = package.package_json();
        doc["dist"] = json!({
            "tarball": format!("{base}/{}/-/{}-{version}.tgz", package.name, unscoped(&package.name)),
            "integrity": published.integrity.clone().unwrap_or_else(|| sri_sha512(&published.tarball)),
        });
        version_map.insert(version.clone(), doc);
    }
    let packument = json!({
        "name": trimmed,
        "dist-tags": guard.tags.get(trimmed).cloned().unwrap_or_default(),
        "versions": version_map,
    });
    drop(guard);
    let _ = request.respond(Response::from_string(packument.to_string()).with_header(json_header));
}
