//! How agentpack reaches registries: credentials, plain-HTTP hosts, retries.
//!
//! Credentials, first found wins:
//! 1. `AGENTPACK_OCI_TOKEN`, for every registry: `user:password` (HTTP basic credentials, also
//!    what a registry's token endpoint is asked with) or a bare token (sent as
//!    `Authorization: Bearer <token>`, like `oras --registry-token`);
//! 2. the `auths.<host>.auth` entry (base64 `user:password`) of `$DOCKER_CONFIG/config.json`,
//!    else `$HOME/.docker/config.json`, for that registry (keys may be written `host`,
//!    `https://host` or `https://host/v1/`);
//! 3. none: anonymous (public pulls; a registry that issues anonymous bearer tokens through
//!    `WWW-Authenticate` still works, the client asks its token endpoint).
//!
//! Credential helpers (`credsStore`, `credHelpers`) are not run; which helper the docker config
//! names for a registry is kept ([`OciTransport::credential_helper_for`]) so that a refusal can
//! say so. This module only reads; it never writes a credential anywhere, and its `Debug` output
//! shows no secret.
//!
//! HTTPS is the default; plain HTTP is used only for loopback registries (`127.0.0.1`, `::1`,
//! `localhost`) and the hosts listed, comma-separated, in `AGENTPACK_OCI_INSECURE` (`host` or
//! `host:port`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;

use super::reference::host_of;

/// Where the credentials for one registry came from.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// `user:password`.
    Basic {
        /// The user name.
        user: String,
        /// The password or token.
        password: String,
    },
    /// A bearer token sent as is.
    Bearer(String),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Basic { user, .. } => write!(f, "Basic({user}, <redacted>)"),
            Credential::Bearer(_) => f.write_str("Bearer(<redacted>)"),
        }
    }
}

impl Credential {
    /// Reads `user:password` or a bare token.
    pub fn parse(value: &str) -> Option<Credential> {
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        Some(match value.split_once(':') {
            Some((user, password)) => Credential::Basic {
                user: user.to_owned(),
                password: password.to_owned(),
            },
            None => Credential::Bearer(value.to_owned()),
        })
    }

    pub(crate) fn to_registry_auth(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            Credential::Basic { user, password } => {
                oci_client::secrets::RegistryAuth::Basic(user.clone(), password.clone())
            }
            Credential::Bearer(token) => oci_client::secrets::RegistryAuth::Bearer(token.clone()),
        }
    }
}

/// Credentials, plain-HTTP hosts and the retry policy of every registry call.
#[derive(Debug, Clone)]
pub struct OciTransport {
    token: Option<Credential>,
    docker_auths: BTreeMap<String, Credential>,
    docker_config: Option<PathBuf>,
    /// `credHelpers` of the docker config: registry -> helper name.
    docker_cred_helpers: BTreeMap<String, String>,
    /// `credsStore` of the docker config.
    docker_creds_store: Option<String>,
    insecure: Vec<String>,
    /// Attempts after the first for a connect error, a timeout, a 429 or a 5xx.
    pub retries: u32,
    /// The wait before the first retry; doubled for each next one.
    pub backoff: Duration,
    /// Blob transfers running at once.
    pub concurrency: usize,
    /// Download, entry and extraction caps of a pull.
    pub limits: crate::limits::Limits,
    warnings: Vec<String>,
}

impl Default for OciTransport {
    fn default() -> Self {
        OciTransport {
            token: None,
            docker_auths: BTreeMap::new(),
            docker_config: None,
            docker_cred_helpers: BTreeMap::new(),
            docker_creds_store: None,
            insecure: Vec::new(),
            retries: 3,
            backoff: Duration::from_millis(250),
            concurrency: 4,
            limits: crate::limits::Limits::default(),
            warnings: Vec::new(),
        }
    }
}

/// `https://host/v1/` -> `host`; `docker.io` names -> `index.docker.io` (what the client resolves).
fn normalize_auth_key(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key).to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" => "index.docker.io".to_owned(),
        _ => host,
    }
}

impl OciTransport {
    /// Anonymous, HTTPS except loopback, default retries.
    pub fn anonymous() -> OciTransport {
        OciTransport::default()
    }

    /// Reads `AGENTPACK_OCI_TOKEN`, `AGENTPACK_OCI_INSECURE`, `DOCKER_CONFIG` and `HOME` through
    /// `var` (see the module docs). An unreadable or malformed docker config is skipped with a
    /// warning ([`OciTransport::warnings`]).
    pub fn from_env(var: &dyn Fn(&str) -> Option<String>) -> OciTransport {
        let mut transport = OciTransport {
            token: var("AGENTPACK_OCI_TOKEN").and_then(|value| Credential::parse(&value)),
            insecure: var("AGENTPACK_OCI_INSECURE")
                .map(|list| {
                    list.split(',')
                        .map(|host| host.trim().to_ascii_lowercase())
                        .filter(|host| !host.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            ..OciTransport::default()
        };
        let config = match var("DOCKER_CONFIG").filter(|dir| !dir.is_empty()) {
            Some(dir) => Some(PathBuf::from(dir).join("config.json")),
            None => var("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".docker").join("config.json")),
        };
        if let Some(path) = config {
            transport.read_docker_config(path);
        }
        transport
    }

    fn read_docker_config(&mut self, path: PathBuf) {
        let text = match fs_err::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => {
                self.warnings.push(format!(
                    "warning: cannot read the docker config {} ({error}); registries are reached without its credentials",
                    path.display()
                ));
                return;
            }
        };
        let value: serde_json::Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(error) => {
                self.warnings.push(format!(
                    "warning: the docker config {} is not valid JSON ({error}); registries are reached without its credentials",
                    path.display()
                ));
                return;
            }
        };
        if let Some(auths) = value.get("auths").and_then(|a| a.as_object()) {
            for (key, entry) in auths {
                let Some(encoded) = entry.get("auth").and_then(|a| a.as_str()) else {
                    continue;
                };
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                match decoded.as_deref().and_then(|d| d.split_once(':')) {
                    Some((user, password)) => {
                        self.docker_auths.insert(
                            normalize_auth_key(key),
                            Credential::Basic {
                                user: user.to_owned(),
                                password: password.to_owned(),
                            },
                        );
                    }
                    None => self.warnings.push(format!(
                        "warning: the `auth` of {key} in {} is not base64 `user:password`; it is not used",
                        path.display()
                    )),
                }
            }
        }
        if let Some(helpers) = value.get("credHelpers").and_then(|h| h.as_object()) {
            for (key, helper) in helpers {
                if let Some(helper) = helper.as_str().filter(|h| !h.is_empty()) {
                    self.docker_cred_helpers
                        .insert(normalize_auth_key(key), helper.to_owned());
                }
            }
        }
        self.docker_creds_store = value
            .get("credsStore")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        self.docker_config = Some(path);
    }

    /// The credential helper the docker config names for `registry` (its `credHelpers` entry,
    /// else `credsStore`), as `docker-credential-<name>`: agentpack does not run it, and says so
    /// when the registry refuses a call made without credentials.
    pub fn credential_helper_for(&self, registry: &str) -> Option<String> {
        let key = normalize_auth_key(registry);
        self.docker_cred_helpers
            .get(&key)
            .or_else(|| self.docker_cred_helpers.get(host_of(&key)))
            .or(self.docker_creds_store.as_ref())
            .map(|name| format!("docker-credential-{name}"))
    }

    /// The docker config that was read, if any.
    pub fn docker_config_path(&self) -> Option<&std::path::Path> {
        self.docker_config.as_deref()
    }

    /// Warnings met while reading the environment (an unreadable docker config).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The credential for `registry` (`host[:port]`), if any.
    pub fn credential_for(&self, registry: &str) -> Option<&Credential> {
        if let Some(token) = &self.token {
            return Some(token);
        }
        let key = normalize_auth_key(registry);
        self.docker_auths
            .get(&key)
            .or_else(|| self.docker_auths.get(host_of(&key)))
    }

    /// Where the credential for `registry` comes from, for messages (never the credential).
    pub fn credential_source(&self, registry: &str) -> Option<String> {
        if self.token.is_some() {
            return Some("AGENTPACK_OCI_TOKEN".to_owned());
        }
        self.credential_for(registry)?;
        self.docker_config
            .as_ref()
            .map(|path| format!("the docker config {}", path.display()))
    }

    /// Whether `registry` is reached over plain HTTP: loopback, or listed in
    /// `AGENTPACK_OCI_INSECURE` (by host or by host:port).
    pub fn is_plain_http(&self, registry: &str) -> bool {
        let registry = registry.to_ascii_lowercase();
        let host = host_of(&registry);
        matches!(host, "127.0.0.1" | "::1" | "localhost")
            || self
                .insecure
                .iter()
                .any(|listed| *listed == registry || listed == host)
    }

    /// Replaces the credential for every registry (tests, callers with their own source).
    pub fn with_credential(mut self, credential: Option<Credential>) -> OciTransport {
        self.token = credential;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn token_forms() {
        assert_eq!(
            Credential::parse("alice:s3:cret"),
            Some(Credential::Basic {
                user: "alice".into(),
                password: "s3:cret".into()
            })
        );
        assert_eq!(
            Credential::parse("ghp_abc"),
            Some(Credential::Bearer("ghp_abc".into()))
        );
        assert_eq!(Credential::parse("  "), None);
        let shown = format!("{:?}", Credential::parse("alice:hunter2").unwrap());
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn docker_config_credentials_by_host() {
        let dir = tempfile::tempdir().unwrap();
        let auth = base64::engine::general_purpose::STANDARD.encode("bob:pw");
        std::fs::write(
            dir.path().join("config.json"),
            format!(r#"{{"auths":{{"https://127.0.0.1:5001/v1/":{{"auth":"{auth}"}},"ghcr.io":{{"auth":"bm9jb2xvbg=="}}}}}}"#),
        )
        .unwrap();
        let transport =
            OciTransport::from_env(&env(&[("DOCKER_CONFIG", dir.path().display().to_string())]));
        assert_eq!(
            transport.credential_for("127.0.0.1:5001"),
            Some(&Credential::Basic {
                user: "bob".into(),
                password: "pw".into()
            })
        );
        assert_eq!(transport.credential_for("127.0.0.1:5002"), None);
        assert_eq!(transport.credential_for("ghcr.io"), None);
        assert_eq!(transport.warnings().len(), 1, "{:?}", transport.warnings());
        let shown = format!("{transport:?}");
        assert!(!shown.contains("\"pw\""), "{shown}");
    }

    #[test]
    fn credential_helpers_are_named_not_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"credsStore":"desktop","credHelpers":{"ghcr.io":"gh","https://123.dkr.ecr.us-east-1.amazonaws.com":"ecr-login"}}"#,
        )
        .unwrap();
        let transport =
            OciTransport::from_env(&env(&[("DOCKER_CONFIG", dir.path().display().to_string())]));
        assert_eq!(
            transport.credential_helper_for("ghcr.io").as_deref(),
            Some("docker-credential-gh")
        );
        assert_eq!(
            transport
                .credential_helper_for("123.dkr.ecr.us-east-1.amazonaws.com")
                .as_deref(),
            Some("docker-credential-ecr-login")
        );
        assert_eq!(
            transport.credential_helper_for("quay.io").as_deref(),
            Some("docker-credential-desktop")
        );
        assert_eq!(transport.credential_for("ghcr.io"), None);
        assert!(OciTransport::anonymous()
            .credential_helper_for("ghcr.io")
            .is_none());
    }

    #[test]
    fn plain_http_only_for_loopback_and_listed_hosts() {
        let transport = OciTransport::from_env(&env(&[(
            "AGENTPACK_OCI_INSECURE",
            "cache.lan, Zot.internal:8080".into(),
        )]));
        assert!(transport.is_plain_http("127.0.0.1:5000"));
        assert!(transport.is_plain_http("localhost"));
        assert!(transport.is_plain_http("[::1]:5000"));
        assert!(transport.is_plain_http("cache.lan:5000"));
        assert!(transport.is_plain_http("zot.internal:8080"));
        assert!(!transport.is_plain_http("zot.internal:9090"));
        assert!(!transport.is_plain_http("ghcr.io"));
    }
}
