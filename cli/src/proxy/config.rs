//! The proxy's settings, read from the `AGENTPACK_PROXY_*` variables (and `ANTHROPIC_BASE_URL`)
//! through a lookup function, so the parsing is pure and unit-tested.
//!
//! This module only turns strings into typed settings and says which variable was wrong; it never
//! reads the environment itself (the caller passes [`crate::env::var`]) and never opens a socket.

use std::path::PathBuf;
use std::time::Duration;

use hyper::Uri;

use crate::env::EnvVars;

/// The Anthropic API, the upstream when neither override is set.
pub const DEFAULT_UPSTREAM: &str = "https://api.anthropic.com";
/// Default of `AGENTPACK_PROXY_LOG_MAX_BODY_BYTES`.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4096;
/// Default of `AGENTPACK_PROXY_WS_CONNECT_TIMEOUT_SECS`.
pub const DEFAULT_WS_CONNECT_TIMEOUT_SECS: u64 = 15;
/// Default of `AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS`.
pub const DEFAULT_WS_IDLE_TIMEOUT_SECS: u64 = 300;
/// Default of `AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS`.
pub const DEFAULT_UPSTREAM_TIMEOUT_SECS: u64 = 600;

/// The HTTP version the proxy speaks to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// HTTPS upstreams negotiate HTTP/2 or HTTP/1.1 by ALPN; plain `http://` upstreams get HTTP/1.1.
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2 only (over TLS by ALPN; plain `http://` with prior knowledge).
    Http2,
}

impl Transport {
    /// The value as written in `AGENTPACK_PROXY_TRANSPORT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::Http1 => "http1",
            Transport::Http2 => "http2",
        }
    }
}

/// Where the upstream URL came from (reported when the proxy starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamSource {
    /// `AGENTPACK_PROXY_UPSTREAM`.
    ProxyOverride,
    /// The user's own `ANTHROPIC_BASE_URL`.
    AnthropicBaseUrl,
    /// Neither was set: the Anthropic API.
    Default,
}

/// Everything the proxy needs to run.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The upstream base URL (scheme, authority, optional path prefix; no query).
    pub upstream: Uri,
    pub upstream_source: UpstreamSource,
    pub transport: Transport,
    /// Written into each JSON request body's `model` field when set.
    pub model_override: Option<String>,
    pub log_dir: PathBuf,
    pub log_payloads: bool,
    pub max_body_bytes: usize,
    pub ws_connect_timeout: Duration,
    pub ws_idle_timeout: Duration,
    /// How long to wait for the upstream's response headers.
    pub upstream_timeout: Duration,
}

/// A proxy variable with a value the proxy cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{var}={value:?} is not an http:// or https:// URL ({reason})\n  fix  set {var} to a base URL such as https://api.anthropic.com")]
    BadUrl {
        var: &'static str,
        value: String,
        reason: String,
    },
    #[error("{var}={value:?} is not one of auto, http1, http2\n  fix  set {var} to auto, http1 or http2, or unset it")]
    BadTransport { var: &'static str, value: String },
    #[error("{var}={value:?} is not a whole number{unit}\n  fix  set {var} to a positive whole number, or unset it for the default")]
    BadNumber {
        var: &'static str,
        value: String,
        unit: &'static str,
    },
    #[error("{var} is empty after trimming\n  fix  set {var} to a model name, or unset it")]
    EmptyModel { var: &'static str },
}

impl ProxyConfig {
    /// Reads the settings through `lookup` (a variable's value, `None` when unset or empty);
    /// `default_log_dir` is `$AGENTPACK_HOME/projects/<project-hash>/proxy-logs`.
    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
        default_log_dir: PathBuf,
    ) -> Result<Self, ConfigError> {
        let (upstream_var, upstream_text, upstream_source) =
            if let Some(value) = lookup(EnvVars::AGENTPACK_PROXY_UPSTREAM) {
                (
                    EnvVars::AGENTPACK_PROXY_UPSTREAM,
                    value,
                    UpstreamSource::ProxyOverride,
                )
            } else if let Some(value) = lookup(EnvVars::ANTHROPIC_BASE_URL) {
                (
                    EnvVars::ANTHROPIC_BASE_URL,
                    value,
                    UpstreamSource::AnthropicBaseUrl,
                )
            } else {
                (
                    EnvVars::AGENTPACK_PROXY_UPSTREAM,
                    DEFAULT_UPSTREAM.to_string(),
                    UpstreamSource::Default,
                )
            };
        let upstream = parse_upstream(upstream_var, &upstream_text)?;
        let transport = match lookup(EnvVars::AGENTPACK_PROXY_TRANSPORT)
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("auto") => Transport::Auto,
            Some("http1" | "http1.1" | "http/1.1") => Transport::Http1,
            Some("http2" | "h2" | "http/2") => Transport::Http2,
            Some(_) => {
                return Err(ConfigError::BadTransport {
                    var: EnvVars::AGENTPACK_PROXY_TRANSPORT,
                    value: lookup(EnvVars::AGENTPACK_PROXY_TRANSPORT).unwrap_or_default(),
                })
            }
        };
        let model_override = match lookup(EnvVars::AGENTPACK_PROXY_MODEL) {
            None => None,
            Some(value) if value.trim().is_empty() => {
                return Err(ConfigError::EmptyModel {
                    var: EnvVars::AGENTPACK_PROXY_MODEL,
                })
            }
            Some(value) => Some(value.trim().to_string()),
        };
        let log_payloads = lookup(EnvVars::AGENTPACK_PROXY_LOG_PAYLOADS).is_some_and(|value| {
            matches!(value.to_ascii_lowercase().as_str(), "1" | "true" | "yes")
        });
        let number = |var: &'static str, default: u64, unit: &'static str| match lookup(var) {
            None => Ok(default),
            Some(value) => match value.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(ConfigError::BadNumber { var, value, unit }),
            },
        };
        let max_body_bytes = number(
            EnvVars::AGENTPACK_PROXY_LOG_MAX_BODY_BYTES,
            DEFAULT_MAX_BODY_BYTES as u64,
            " of bytes",
        )?;
        let seconds = |var, default| number(var, default, " of seconds").map(Duration::from_secs);
        Ok(ProxyConfig {
            upstream,
            upstream_source,
            transport,
            model_override,
            log_dir: lookup(EnvVars::AGENTPACK_PROXY_LOG_DIR)
                .map(PathBuf::from)
                .unwrap_or(default_log_dir),
            log_payloads,
            max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(usize::MAX),
            ws_connect_timeout: seconds(
                EnvVars::AGENTPACK_PROXY_WS_CONNECT_TIMEOUT_SECS,
                DEFAULT_WS_CONNECT_TIMEOUT_SECS,
            )?,
            ws_idle_timeout: seconds(
                EnvVars::AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS,
                DEFAULT_WS_IDLE_TIMEOUT_SECS,
            )?,
            upstream_timeout: seconds(
                EnvVars::AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS,
                DEFAULT_UPSTREAM_TIMEOUT_SECS,
            )?,
        })
    }

    /// The upstream as printed for people (no credentials can be in it: userinfo is refused).
    pub fn upstream_display(&self) -> String {
        self.upstream.to_string().trim_end_matches('/').to_string()
    }

    /// The upstream, where it came from and the transport, for the line printed at start.
    pub fn describe_upstream(&self) -> String {
        let source = match self.upstream_source {
            UpstreamSource::ProxyOverride => EnvVars::AGENTPACK_PROXY_UPSTREAM,
            UpstreamSource::AnthropicBaseUrl => EnvVars::ANTHROPIC_BASE_URL,
            UpstreamSource::Default => "default",
        };
        format!(
            "{} ({source}, transport {})",
            self.upstream_display(),
            self.transport.as_str()
        )
    }
}

fn parse_upstream(var: &'static str, text: &str) -> Result<Uri, ConfigError> {
    let bad = |reason: &str| ConfigError::BadUrl {
        var,
        value: text.to_string(),
        reason: reason.to_string(),
    };
    let uri: Uri = text.trim().parse().map_err(|_| bad("not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(_) => return Err(bad("the scheme must be http or https")),
        None => return Err(bad("no scheme")),
    }
    let Some(authority) = uri.authority() else {
        return Err(bad("no host"));
    };
    if authority.as_str().contains('@') {
        return Err(bad("credentials in the URL are not supported"));
    }
    if uri.query().is_some() {
        return Err(bad("a base URL has no query"));
    }
    Ok(uri)
}

/// The upstream URI for a request to `path_and_query`: the base's path prefix, then the request's
/// path and query (`https://gw/anthropic` + `/v1/messages?beta=true`).
pub fn upstream_uri(base: &Uri, path_and_query: &str) -> Result<Uri, hyper::http::Error> {
    let prefix = base.path().trim_end_matches('/');
    let path = if path_and_query.starts_with('/') {
        path_and_query.to_string()
    } else {
        format!("/{path_and_query}")
    };
    let mut parts = hyper::http::uri::Parts::default();
    parts.scheme = base.scheme().cloned();
    parts.authority = base.authority().cloned();
    parts.path_and_query = Some(format!("{prefix}{path}").parse()?);
    Ok(Uri::from_parts(parts)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(vars: &[(&str, &str)]) -> Result<ProxyConfig, ConfigError> {
        let map: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProxyConfig::from_lookup(&|name| map.get(name).cloned(), PathBuf::from("/logs"))
    }

    #[test]
    fn defaults_follow_the_docs() {
        let config = config(&[]).unwrap();
        assert_eq!(config.upstream_display(), "https://api.anthropic.com");
        assert_eq!(config.upstream_source, UpstreamSource::Default);
        assert_eq!(config.transport, Transport::Auto);
        assert_eq!(config.max_body_bytes, 4096);
        assert_eq!(config.ws_connect_timeout, Duration::from_secs(15));
        assert_eq!(config.ws_idle_timeout, Duration::from_secs(300));
        assert_eq!(config.upstream_timeout, Duration::from_secs(600));
        assert_eq!(config.log_dir, PathBuf::from("/logs"));
        assert!(!config.log_payloads);
        assert_eq!(config.model_override, None);
    }

    #[test]
    fn the_proxy_override_beats_the_users_base_url() {
        let both = config(&[
            ("ANTHROPIC_BASE_URL", "https://gateway.example/anthropic"),
            ("AGENTPACK_PROXY_UPSTREAM", "http://127.0.0.1:8080"),
        ])
        .unwrap();
        assert_eq!(both.upstream_display(), "http://127.0.0.1:8080");
        assert_eq!(both.upstream_source, UpstreamSource::ProxyOverride);
        assert_eq!(
            both.describe_upstream(),
            "http://127.0.0.1:8080 (AGENTPACK_PROXY_UPSTREAM, transport auto)"
        );
        let user = config(&[("ANTHROPIC_BASE_URL", "https://gateway.example/anthropic")]).unwrap();
        assert_eq!(user.upstream_source, UpstreamSource::AnthropicBaseUrl);
        assert_eq!(
            upstream_uri(&user.upstream, "/v1/messages?beta=true")
                .unwrap()
                .to_string(),
            "https://gateway.example/anthropic/v1/messages?beta=true"
        );
    }

    #[test]
    fn bad_values_name_their_variable() {
        let error = config(&[("AGENTPACK_PROXY_TRANSPORT", "quic")]).unwrap_err();
        assert!(error
            .to_string()
            .contains("AGENTPACK_PROXY_TRANSPORT=\"quic\""));
        let error = config(&[("AGENTPACK_PROXY_LOG_MAX_BODY_BYTES", "4k")]).unwrap_err();
        assert!(error.to_string().starts_with(
            "AGENTPACK_PROXY_LOG_MAX_BODY_BYTES=\"4k\" is not a whole number of bytes"
        ));
        assert!(config(&[("AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS", "0")]).is_err());
        assert!(config(&[("AGENTPACK_PROXY_UPSTREAM", "ftp://x")]).is_err());
        assert!(config(&[("AGENTPACK_PROXY_UPSTREAM", "https://user:pw@x")]).is_err());
        assert!(config(&[("ANTHROPIC_BASE_URL", "localhost:8080")]).is_err());
    }

    #[test]
    fn payload_logging_takes_the_documented_spellings() {
        for on in ["1", "true", "YES"] {
            assert!(
                config(&[("AGENTPACK_PROXY_LOG_PAYLOADS", on)])
                    .unwrap()
                    .log_payloads
            );
        }
        assert!(
            !config(&[("AGENTPACK_PROXY_LOG_PAYLOADS", "0")])
                .unwrap()
                .log_payloads
        );
        let t = config(&[
            ("AGENTPACK_PROXY_TRANSPORT", "HTTP1"),
            ("AGENTPACK_PROXY_MODEL", " claude-x "),
        ])
        .unwrap();
        assert_eq!(t.transport, Transport::Http1);
        assert_eq!(t.model_override.as_deref(), Some("claude-x"));
    }
}
