//! Every environment variable agentpack reads, named once.
//!
//! uv keeps its variables in one place (`uv-static`'s `EnvVars`); so do we. Code elsewhere in the binary
//! refers to these constants instead of spelling a variable name, so `git grep` on a constant finds every
//! reader. Libraries never read the environment: the binary reads it here and passes values in.

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
    /// Hash every cache entry on every launch.
    pub const AGENTPACK_FULL_VERIFY: &'static str = "AGENTPACK_FULL_VERIFY";
    /// Base URL of the GitHub REST API (tests point it at a local server).
    pub const AGENTPACK_GITHUB_API_URL: &'static str = "AGENTPACK_GITHUB_API_URL";
    /// Base URL of GitHub for git smart HTTP and archives.
    pub const AGENTPACK_GITHUB_URL: &'static str = "AGENTPACK_GITHUB_URL";
    /// Overrides the host identity recorded in locks and leases (tests simulate hosts with it).
    pub const AGENTPACK_HOST_ID: &'static str = "AGENTPACK_HOST_ID";
    /// Bearer token for GitHub (takes precedence over `GH_TOKEN`).
    pub const GITHUB_TOKEN: &'static str = "GITHUB_TOKEN";
    /// Bearer token for GitHub when `GITHUB_TOKEN` is unset.
    pub const GH_TOKEN: &'static str = "GH_TOKEN";
    /// XDG base directory for user data (default home of agentpack).
    pub const XDG_DATA_HOME: &'static str = "XDG_DATA_HOME";
    /// XDG base directory for caches (where the index lives when the store is remote).
    pub const XDG_CACHE_HOME: &'static str = "XDG_CACHE_HOME";
    /// The user's home directory.
    pub const HOME: &'static str = "HOME";
}

/// Reads a variable, treating an empty value as unset.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// Reads a documented boolean toggle: `1`, `true` or `yes` (any case) mean on.
#[allow(dead_code)]
pub fn flag(name: &str) -> bool {
    var(name)
        .is_some_and(|value| matches!(value.to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}
