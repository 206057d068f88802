//! The npm registry client: packuments, dist-tag and version resolution, tarball downloads, and
//! which registry a server uses.
//!
//! It must never read the environment itself (the caller passes the environment's
//! `npm_config_registry`) and never send credentials: per-user `.npmrc` files are not read.

use serde_json::Value;

use super::spec::{PackageRequest, VersionRequest};
use crate::limits::{self, LimitExceeded, LimitKind, Limits};

/// The public registry, used when neither the server's env nor the environment names one.
pub const PUBLIC_REGISTRY: &str = "https://registry.npmjs.org";

/// The registry a server uses: `npm_config_registry` in the server's env (a literal value, not a
/// `${VAR}` reference), then the environment's, then [`PUBLIC_REGISTRY`]. No trailing slash.
pub fn registry_for<'a>(
    server_env: impl IntoIterator<Item = (&'a String, &'a String)>,
    environment: Option<&str>,
) -> String {
    let from_server = server_env
        .into_iter()
        .find(|(k, v)| k.eq_ignore_ascii_case("npm_config_registry") && !v.contains("${"))
        .map(|(_, v)| v.clone());
    let chosen = from_server
        .or_else(|| environment.filter(|v| !v.is_empty()).map(str::to_owned))
        .unwrap_or_else(|| PUBLIC_REGISTRY.to_owned());
    chosen.trim_end_matches('/').to_owned()
}

/// One version, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPackage {
    /// Package name.
    pub name: String,
    /// Exact version.
    pub version: String,
    /// `dist.integrity`.
    pub integrity: String,
    /// `dist.tarball`.
    pub tarball: String,
    /// The executable npx would run, relative to the package directory (`cli.js`), if any.
    pub bin: Option<String>,
}

/// Why the registry gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Nothing answered (connection refused, DNS, timeout).
    #[error("the npm registry {registry} cannot be reached for `{package}`: {cause}")]
    Unreachable {
        /// The registry URL.
        registry: String,
        /// The package asked for.
        package: String,
        /// The cause.
        cause: reqwest::Error,
    },
    /// The registry answered with an error status.
    #[error("the npm registry {registry} answered {status} for `{package}`")]
    Status {
        /// The registry URL.
        registry: String,
        /// The package asked for.
        package: String,
        /// The HTTP status.
        status: u16,
    },
    /// The answer was not a packument.
    #[error("the npm registry {registry} sent an unreadable answer for `{package}`: {message}")]
    BadAnswer {
        /// The registry URL.
        registry: String,
        /// The package asked for.
        package: String,
        /// What was wrong.
        message: String,
    },
    /// The tag or version does not exist.
    #[error("`{package}@{requested}` does not exist on {registry}")]
    NoSuchVersion {
        /// The registry URL.
        registry: String,
        /// The package.
        package: String,
        /// The tag or version asked for.
        requested: String,
    },
    /// Downloading a tarball failed.
    #[error("cannot download {url}: {message}")]
    Download {
        /// The tarball URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// An answer or a tarball crossed a limit.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

impl RegistryError {
    /// Whether the registry could not be reached at all (as opposed to answering "no").
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RegistryError::Unreachable { .. })
            || matches!(self, RegistryError::Status { status, .. } if *status >= 500)
    }
}

/// A blocking HTTP client for npm registries.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    http: reqwest::blocking::Client,
    limits: Limits,
}

impl RegistryClient {
    /// A client with the default [`Limits`].
    pub fn new() -> Result<Self, reqwest::Error> {
        Self::with_limits(Limits::default())
    }

    /// A client with `limits`: connect and read timeouts, packuments read with the JSON size cap,
    /// tarballs with the download size cap.
    pub fn with_limits(limits: Limits) -> Result<Self, reqwest::Error> {
        // A blocking client applies `timeout` to the response head and to each read of the body.
        let http = reqwest::blocking::Client::builder()
            .connect_timeout(limits.connect_timeout)
            .timeout(limits.read_timeout)
            .user_agent(concat!("agentpack/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http, limits })
    }

    /// The limits this client applies.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The packument of `name` on `registry`.
    pub fn packument(&self, registry: &str, name: &str) -> Result<Value, RegistryError> {
        let url = format!("{registry}/{}", name.replace('/', "%2f"));
        let response = self
            .http
            .get(&url)
            .header("Accept", "application/json")
            .send()
            .map_err(|source| RegistryError::Unreachable {
                registry: registry.to_owned(),
                package: name.to_owned(),
                cause: source,
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(RegistryError::Status {
                registry: registry.to_owned(),
                package: name.to_owned(),
                status: status.as_u16(),
            });
        }
        let cap = LimitExceeded::too_large(
            &self.limits,
            LimitKind::JsonSize,
            format!("the npm registry's answer for `{name}` ({url})"),
        );
        let bytes =
            limits::read_capped(response, self.limits.max_json_bytes, cap).map_err(|e| {
                match LimitExceeded::find(&e) {
                    Some(limit) => RegistryError::Limit(limit.clone()),
                    None => RegistryError::BadAnswer {
                        registry: registry.to_owned(),
                        package: name.to_owned(),
                        message: e.to_string(),
                    },
                }
            })?;
        serde_json::from_slice(&bytes).map_err(|e| RegistryError::BadAnswer {
            registry: registry.to_owned(),
            package: name.to_owned(),
            message: e.to_string(),
        })
    }

    /// Resolves a dist-tag or exact version to the version, integrity, tarball and bin.
    pub fn resolve(
        &self,
        registry: &str,
        request: &PackageRequest,
    ) -> Result<ResolvedPackage, RegistryError> {
        let packument = self.packument(registry, &request.name)?;
        resolve_in_packument(&packument, registry, request)
    }

    /// Downloads a tarball's bytes.
    pub fn download(&self, url: &str) -> Result<Vec<u8>, RegistryError> {
        let err = |message: String| RegistryError::Download {
            url: url.to_owned(),
            message,
        };
        let response = self.http.get(url).send().map_err(|e| err(e.to_string()))?;
        if !response.status().is_success() {
            return Err(err(format!("status {}", response.status().as_u16())));
        }
        let cap = LimitExceeded::too_large(
            &self.limits,
            LimitKind::DownloadSize,
            format!("the download of {url}"),
        );
        if response
            .content_length()
            .is_some_and(|length| length > self.limits.max_download_bytes)
        {
            return Err(RegistryError::Limit(cap));
        }
        limits::read_capped(response, self.limits.max_download_bytes, cap).map_err(|e| {
            match LimitExceeded::find(&e) {
                Some(limit) => RegistryError::Limit(limit.clone()),
                None => err(e.to_string()),
            }
        })
    }
}

/// Picks the version a request names out of a packument.
pub fn resolve_in_packument(
    packument: &Value,
    registry: &str,
    request: &PackageRequest,
) -> Result<ResolvedPackage, RegistryError> {
    let requested = match &request.version {
        VersionRequest::Exact(v) | VersionRequest::Tag(v) => v.clone(),
    };
    let missing = || RegistryError::NoSuchVersion {
        registry: registry.to_owned(),
        package: request.name.clone(),
        requested: requested.clone(),
    };
    let version = match &request.version {
        VersionRequest::Exact(v) => v.clone(),
        VersionRequest::Tag(tag) => packument
            .get("dist-tags")
            .and_then(|t| t.get(tag))
            .and_then(Value::as_str)
            .ok_or_else(missing)?
            .to_owned(),
    };
    let doc = packument
        .get("versions")
        .and_then(|v| v.get(&version))
        .ok_or_else(missing)?;
    let bad = |message: &str| RegistryError::BadAnswer {
        registry: registry.to_owned(),
        package: request.name.clone(),
        message: format!("version {version}: {message}"),
    };
    let dist = doc.get("dist").ok_or_else(|| bad("no `dist`"))?;
    let dist_text = |key: &str| {
        dist.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| bad(&format!("no `dist.{key}`")))
    };
    let integrity = dist_text("integrity")?;
    let tarball = dist_text("tarball")?;
    Ok(ResolvedPackage {
        name: request.name.clone(),
        version,
        integrity,
        tarball,
        bin: pick_bin(&request.name, doc.get("bin")),
    })
}

/// The executable npx runs: the only `bin`, or the one named after the package.
pub fn pick_bin(name: &str, bin: Option<&Value>) -> Option<String> {
    let clean = |p: &str| p.trim_start_matches("./").to_owned();
    match bin? {
        Value::String(path) => Some(clean(path)),
        Value::Object(map) => {
            if map.len() == 1 {
                return map.values().next().and_then(Value::as_str).map(clean);
            }
            let short = name.rsplit('/').next().unwrap_or(name);
            map.get(short).and_then(Value::as_str).map(clean)
        }
        _ => None,
    }
}

/// The conventional tarball URL of `name@version` on `registry`.
pub fn tarball_url(registry: &str, name: &str, version: &str) -> String {
    let short = name.rsplit('/').next().unwrap_or(name);
    format!("{registry}/{name}/-/{short}-{version}.tgz")
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;

    #[test]
    fn registry_order() {
        let mut env = IndexMap::new();
        assert_eq!(registry_for(&env, None), PUBLIC_REGISTRY);
        assert_eq!(registry_for(&env, Some("http://e/")), "http://e");
        env.insert("npm_config_registry".to_owned(), "http://s".to_owned());
        assert_eq!(registry_for(&env, Some("http://e")), "http://s");
        env.insert("npm_config_registry".to_owned(), "${REG}".to_owned());
        assert_eq!(registry_for(&env, Some("http://e")), "http://e");
    }

    #[test]
    fn endless_packuments_and_tarballs_stop_at_their_caps() {
        use agentpack_test_support::hostile_server::{HostileServer, Hostility};
        let limits = Limits {
            max_json_bytes: 256 * 1024,
            max_download_bytes: 512 * 1024,
            ..Limits::default()
        };
        let client = RegistryClient::with_limits(limits).unwrap();
        let json = HostileServer::start(Hostility::EndlessJson);
        let error = client.packument(&json.url(), "endless").unwrap_err();
        assert!(
            matches!(&error, RegistryError::Limit(limit) if limit.kind == LimitKind::JsonSize),
            "{error}"
        );
        assert!(
            error.to_string().contains("AGENTPACK_MAX_JSON_SIZE"),
            "{error}"
        );
        let body = HostileServer::start(Hostility::EndlessTarball);
        let url = format!("{}/repos/o/r/tarball/x", body.url());
        let error = client.download(&url).unwrap_err();
        assert!(
            matches!(&error, RegistryError::Limit(limit) if limit.kind == LimitKind::DownloadSize),
            "{error}"
        );
    }

    #[test]
    fn a_stalled_registry_fails_after_the_read_timeout() {
        use agentpack_test_support::hostile_server::{HostileServer, Hostility};
        let limits = Limits {
            read_timeout: std::time::Duration::from_millis(300),
            ..Limits::default()
        };
        let client = RegistryClient::with_limits(limits).unwrap();
        let stall = HostileServer::start(Hostility::StallTarball);
        let started = std::time::Instant::now();
        let url = format!("{}/repos/o/r/tarball/x", stall.url());
        assert!(client.download(&url).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn bins() {
        let v: Value = serde_json::json!({"a": "./a.js", "mcp": "cli.js"});
        assert_eq!(pick_bin("@s/mcp", Some(&v)).as_deref(), Some("cli.js"));
        assert_eq!(
            pick_bin("x", Some(&serde_json::json!("./bin/x.js"))).as_deref(),
            Some("bin/x.js")
        );
        assert_eq!(pick_bin("x", Some(&v)), None);
        assert_eq!(
            tarball_url("http://r", "@s/p", "1.0.0"),
            "http://r/@s/p/-/p-1.0.0.tgz"
        );
    }
}
