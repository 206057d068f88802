//! Every environment variable agentpack reads, named once.
//!
//! uv keeps its variables in one place (`uv-static`'s `EnvVars`); so do we. Code elsewhere in the binary
//! refers to these constants instead of spelling a variable name, so `git grep` on a constant finds every
//! reader. Libraries never read the environment: the binary reads it here and passes values in.

use agentpack_builders::limits::{LimitKind, Limits};

/// Names of the environment variables agentpack reads.
pub struct EnvVars;

#[allow(dead_code)] // Later commands read the rest; the list is the documentation.
impl EnvVars {
    /// The user-wide root for the cache, the store, the index and per-project state.
    pub const AGENTPACK_HOME: &'static str = "AGENTPACK_HOME";
    /// Root for per-project staging pointers.
    pub const AGENTPACK_STAGING_ROOT: &'static str = "AGENTPACK_STAGING_ROOT";
    /// `auto|reflink|hardlink|copy`: how store files are materialized.
    pub const AGENTPACK_LINK_MODE: &'static str = "AGENTPACK_LINK_MODE";
    /// Keep the user's AI-attribution settings in staged configs.
    pub const AGENTPACK_KEEP_ATTRIBUTION: &'static str = "AGENTPACK_KEEP_ATTRIBUTION";
    /// `0` skips the project's `./.agents/` overlay.
    pub const AGENTPACK_DOT_AGENTS: &'static str = "AGENTPACK_DOT_AGENTS";
    /// Refuse locks with packages that have no content hash.
    pub const AGENTPACK_REQUIRE_VERIFIED: &'static str = "AGENTPACK_REQUIRE_VERIFIED";
    /// `1|true|yes`: no progress on stderr, like `--no-progress`.
    pub const AGENTPACK_NO_PROGRESS: &'static str = "AGENTPACK_NO_PROGRESS";
    /// Hash every cache entry on every launch.
    pub const AGENTPACK_FULL_VERIFY: &'static str = "AGENTPACK_FULL_VERIFY";
    /// Base URL of the GitHub REST API (tests point it at a local server).
    pub const AGENTPACK_GITHUB_API_URL: &'static str = "AGENTPACK_GITHUB_API_URL";
    /// Base URL of GitHub for git smart HTTP and archives.
    pub const AGENTPACK_GITHUB_URL: &'static str = "AGENTPACK_GITHUB_URL";
    /// Overrides the host identity recorded in locks and leases (tests simulate hosts with it).
    pub const AGENTPACK_HOST_ID: &'static str = "AGENTPACK_HOST_ID";
    /// Directory of the `--proxy claude` JSONL diagnostics.
    pub const AGENTPACK_PROXY_LOG_DIR: &'static str = "AGENTPACK_PROXY_LOG_DIR";
    /// `1|true|yes`: the proxy log keeps truncated, redacted payload snippets.
    pub const AGENTPACK_PROXY_LOG_PAYLOADS: &'static str = "AGENTPACK_PROXY_LOG_PAYLOADS";
    /// The most bytes of one payload snippet in the proxy log (default 4096).
    pub const AGENTPACK_PROXY_LOG_MAX_BODY_BYTES: &'static str =
        "AGENTPACK_PROXY_LOG_MAX_BODY_BYTES";
    /// Seconds the proxy waits to connect to the upstream of a WebSocket (default 15).
    pub const AGENTPACK_PROXY_WS_CONNECT_TIMEOUT_SECS: &'static str =
        "AGENTPACK_PROXY_WS_CONNECT_TIMEOUT_SECS";
    /// Seconds a proxied WebSocket may stay silent both ways before it is closed (default 300).
    pub const AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS: &'static str =
        "AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS";
    /// The proxy's upstream base URL (beats `ANTHROPIC_BASE_URL`).
    pub const AGENTPACK_PROXY_UPSTREAM: &'static str = "AGENTPACK_PROXY_UPSTREAM";
    /// `auto|http1|http2`: the HTTP version the proxy speaks to the upstream.
    pub const AGENTPACK_PROXY_TRANSPORT: &'static str = "AGENTPACK_PROXY_TRANSPORT";
    /// A model name the proxy writes into every request body's `model` field.
    pub const AGENTPACK_PROXY_MODEL: &'static str = "AGENTPACK_PROXY_MODEL";
    /// Seconds the proxy waits for the upstream's response headers (default 600).
    pub const AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS: &'static str =
        "AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS";
    /// Claude Code's API base URL: the proxy's default upstream, replaced for the launched agent.
    pub const ANTHROPIC_BASE_URL: &'static str = "ANTHROPIC_BASE_URL";
    /// `agentpack probe`: seconds one native client process may run (default 30).
    pub const AGENTPACK_PROBE_TIMEOUT_SECS: &'static str = "AGENTPACK_PROBE_TIMEOUT_SECS";
    /// `agentpack probe`: seconds all the client processes of one probe may take (default 600).
    pub const AGENTPACK_PROBE_TOTAL_TIMEOUT_SECS: &'static str =
        "AGENTPACK_PROBE_TOTAL_TIMEOUT_SECS";
    /// `agentpack probe --agent opencode`: how many `debug skill` samples (default 60).
    pub const AGENTPACK_PROBE_OPENCODE_SAMPLES: &'static str = "AGENTPACK_PROBE_OPENCODE_SAMPLES";
    /// Seconds (or `500ms`, `2m`) to open a connection to GitHub or an npm registry (default 30s).
    pub const AGENTPACK_CONNECT_TIMEOUT: &'static str = LimitKind::ConnectTimeout.variable();
    /// How long one read of a download may wait for bytes before it fails (default 60s).
    pub const AGENTPACK_READ_TIMEOUT: &'static str = LimitKind::ReadTimeout.variable();
    /// The largest archive one download may be (`512M`, `1G`; default 1 GiB).
    pub const AGENTPACK_MAX_DOWNLOAD_SIZE: &'static str = LimitKind::DownloadSize.variable();
    /// The largest JSON answer (a ref lookup, a page of tags, an npm packument; default 64 MiB).
    pub const AGENTPACK_MAX_JSON_SIZE: &'static str = LimitKind::JsonSize.variable();
    /// The most bytes one archive may unpack to (default 4 GiB).
    pub const AGENTPACK_MAX_EXTRACTED_SIZE: &'static str = LimitKind::ExtractedSize.variable();
    /// The most entries one archive may unpack to (default 100000).
    pub const AGENTPACK_MAX_FILES: &'static str = LimitKind::Files.variable();
    /// The most unpacked bytes per compressed byte of an archive (default 100).
    pub const AGENTPACK_MAX_COMPRESSION_RATIO: &'static str =
        LimitKind::CompressionRatio.variable();
    /// The most tags one repository may list (default 20000).
    pub const AGENTPACK_MAX_TAGS: &'static str = LimitKind::Tags.variable();
    /// Substituters asked before GitHub and the npm registry: `oci://REGISTRY/REPOSITORY`, comma
    /// or space separated, before those of `$XDG_CONFIG_HOME/agentpack/config.toml`.
    pub const AGENTPACK_SUBSTITUTERS: &'static str = "AGENTPACK_SUBSTITUTERS";
    /// OCI registry credentials: `user:password`, or a bare bearer token (read by
    /// `agentpack_builders::oci::OciTransport::from_env`).
    pub const AGENTPACK_OCI_TOKEN: &'static str = "AGENTPACK_OCI_TOKEN";
    /// Comma-separated OCI registry hosts (`host` or `host:port`) reached over plain HTTP.
    pub const AGENTPACK_OCI_INSECURE: &'static str = "AGENTPACK_OCI_INSECURE";
    /// The directory of the docker `config.json` whose `auths` give OCI credentials.
    pub const DOCKER_CONFIG: &'static str = "DOCKER_CONFIG";
    /// Bearer token for GitHub (takes precedence over `GH_TOKEN`).
    pub const GITHUB_TOKEN: &'static str = "GITHUB_TOKEN";
    /// Bearer token for GitHub when `GITHUB_TOKEN` is unset.
    pub const GH_TOKEN: &'static str = "GH_TOKEN";
    /// XDG base directory for user data (default home of agentpack).
    pub const XDG_DATA_HOME: &'static str = "XDG_DATA_HOME";
    /// XDG base directory for caches (where the index lives when the store is remote).
    pub const XDG_CACHE_HOME: &'static str = "XDG_CACHE_HOME";
    /// XDG base directory for configuration (OpenCode reads `$XDG_CONFIG_HOME/opencode`).
    pub const XDG_CONFIG_HOME: &'static str = "XDG_CONFIG_HOME";
    /// The user's home directory.
    pub const HOME: &'static str = "HOME";
}

/// The download and extraction limits: the defaults, overridden by the `AGENTPACK_*` limit
/// variables above.
pub fn limits() -> anyhow::Result<Limits> {
    Ok(Limits::with_overrides(|kind| var(kind.variable()))?)
}

/// The OCI transport of this command: credentials and plain-HTTP hosts from the environment
/// (`agentpack_builders::oci::OciTransport::from_env`), with the limits of [`limits`], so a pull
/// from a substituter or an `oci://` package obeys the same overrides as a GitHub download.
pub fn oci_transport() -> anyhow::Result<agentpack_builders::oci::OciTransport> {
    let mut transport = agentpack_builders::oci::OciTransport::from_env(&var);
    transport.limits = limits()?;
    Ok(transport)
}

/// The executable of `agent`, found as every launcher finds it: its `*_PATH` override variable,
/// then `PATH` (`agentpack_harness::launch::command::resolve_binary`).
pub fn agent_binary(
    agent: agentpack_harness::Agent,
) -> Result<std::path::PathBuf, agentpack_harness::launch::command::LaunchError> {
    use agentpack_harness::launch::command::{path_override_var, resolve_binary};
    resolve_binary(
        agent,
        std::env::var_os(path_override_var(agent)).as_deref(),
        std::env::var_os("PATH").as_deref(),
    )
}

/// Reads a variable, treating an empty value as unset.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Reads a documented boolean toggle: `1`, `true` or `yes` (any case) mean on.
pub fn flag(name: &str) -> bool {
    var(name)
        .is_some_and(|value| matches!(value.to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}
