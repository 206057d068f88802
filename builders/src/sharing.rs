//! What `env export` refuses to share: the items of a definition that carry a secret or only make
//! sense on this host.
//!
//! Pure: takes the parsed manifest and lock and returns every finding, each naming the item, what
//! is wrong and the fix. The check is conservative (the docs say so): it recognizes inline MCP
//! `env` / `headers` / OAuth secret values, credential-looking arguments and URL credentials (by
//! the one detector MCP rendering and eject use, [`agentpack_harness::render::credentials`]),
//! host-private absolute paths, and path dependencies; it cannot find every secret an arbitrary
//! string may hold.

use std::path::{Path, PathBuf};

use agentpack_harness::render::credentials::{
    credential_args, has_url_credentials, is_reference_only, looks_like_credential,
    strip_references,
};
use agentpack_lockfile::manifest::{Dependency, McpServer};
use agentpack_lockfile::{Lockfile, Manifest};

/// One item that cannot be shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The item, as a TOML path (`[mcp.servers.db].env.TOKEN`).
    pub item: String,
    /// What is wrong with it.
    pub problem: String,
    /// What to do.
    pub fix: String,
}

impl Finding {
    /// A secret written into the definition: the fix is to supply it from the environment.
    fn inline_secret(item: String, problem: impl Into<String>) -> Finding {
        Finding {
            item,
            problem: problem.into(),
            fix: "remove the value and supply it through the launching environment (a `${VAR}` reference)".to_owned(),
        }
    }
}

/// Every finding of `manifest` and `lock`. `private_dirs` are this host's private directories
/// (the user's home, `AGENTPACK_HOME`) besides the well-known ones.
pub fn findings(manifest: &Manifest, lock: &Lockfile, private_dirs: &[PathBuf]) -> Vec<Finding> {
    let mut found = Vec::new();
    for (module, dependency) in &manifest.dependencies {
        if let Dependency::Path(dir) = dependency {
            found.push(Finding {
                item: format!("[dependencies].\"{module}\""),
                problem: format!("a path dependency ({dir}): a bundle does not carry its files"),
                fix: "publish it as a pinned GitHub package, then run `agentpack lock`".to_owned(),
            });
        }
    }
    for package in &lock.packages {
        let direct_path = manifest
            .dependencies
            .iter()
            .any(|(m, d)| m == &package.module && matches!(d, Dependency::Path(_)));
        if package.url.starts_with("path:") && !direct_path {
            found.push(Finding {
                item: format!("pack.lock package {}", package.module),
                problem: format!(
                    "a path package ({}): a bundle does not carry its files",
                    package.url
                ),
                fix: "publish it as a pinned GitHub package, then run `agentpack lock`".to_owned(),
            });
        }
    }
    for (name, server) in &manifest.mcp_servers {
        server_findings(name, server, private_dirs, &mut found);
    }
    found
}

fn server_findings(
    name: &str,
    server: &McpServer,
    private_dirs: &[PathBuf],
    found: &mut Vec<Finding>,
) {
    let item = |field: &str| format!("[mcp.servers.{name}].{field}");
    for (key, value) in &server.env {
        if !is_reference_only(value) {
            found.push(Finding::inline_secret(
                item(&format!("env.{key}")),
                "an inline environment value",
            ));
        }
    }
    for (key, value) in &server.headers {
        if !is_reference_header(value) {
            found.push(Finding::inline_secret(
                item(&format!("headers.{key}")),
                "an inline header value",
            ));
        }
    }
    if let Some(secret) = server
        .oauth
        .as_ref()
        .and_then(|oauth| oauth.client_secret.as_ref())
    {
        if !is_reference_only(secret) {
            found.push(Finding::inline_secret(
                item("oauth.client_secret"),
                "an inline OAuth client secret",
            ));
        }
    }
    let mut texts: Vec<(String, &str)> = Vec::new();
    if let Some(command) = &server.command {
        texts.push((item("command"), command));
    }
    if let Some(url) = &server.url {
        texts.push((item("url"), url));
    }
    if let Some(cwd) = &server.cwd {
        texts.push((item("cwd"), cwd));
    }
    let credentials = credential_args(&server.args);
    for (index, arg) in server.args.iter().enumerate() {
        if credentials.contains(&index) && !has_url_credentials(arg) && !looks_like_credential(arg)
        {
            // A credential flag's value: `--token abc`.
            found.push(Finding::inline_secret(
                item(&format!("args[{index}]")),
                format!(
                    "the value of the credential argument {}",
                    server.args[index - 1]
                ),
            ));
        } else {
            texts.push((item(&format!("args[{index}]")), arg));
        }
    }
    for (item, text) in &texts {
        if has_url_credentials(text) {
            found.push(Finding {
                item: item.clone(),
                problem: "a URL with credentials (user:password@)".to_owned(),
                fix: "remove the credentials from the URL and supply them through the launching environment".to_owned(),
            });
        } else if looks_like_credential(text) {
            found.push(Finding::inline_secret(
                item.clone(),
                "a value that looks like a credential",
            ));
        } else if let Some(path) = host_private_path(text, private_dirs) {
            found.push(Finding {
                item: item.clone(),
                problem: format!("a host-private absolute path ({path})"),
                fix: "use a command on PATH, or a path inside the package (${CLAUDE_PLUGIN_ROOT}/...)".to_owned(),
            });
        }
    }
}

/// A header made of a scheme word and references: `Bearer ${TOKEN}`.
fn is_reference_header(value: &str) -> bool {
    if !value.contains("${") {
        return false;
    }
    let rest = strip_references(value);
    let rest = rest.trim();
    rest.is_empty() || ["bearer", "basic", "token"].contains(&rest.to_ascii_lowercase().as_str())
}

const PRIVATE_PREFIXES: &[&str] = &[
    "/home/",
    "/Users/",
    "/root/",
    "/tmp/",
    "/var/tmp/",
    "/private/",
    "/var/folders/",
    "/mnt/",
    "/media/",
    "/Volumes/",
    "/run/user/",
];

/// The absolute path in `text` (as is, after `=`, or as a `file://` URL) under a private directory.
fn host_private_path(text: &str, private_dirs: &[PathBuf]) -> Option<String> {
    let candidates = [
        Some(text),
        text.split_once('=').map(|(_, value)| value),
        text.strip_prefix("file://"),
    ];
    candidates.into_iter().flatten().find_map(|candidate| {
        let path = Path::new(candidate);
        if !path.is_absolute() {
            return None;
        }
        let private = PRIVATE_PREFIXES.iter().any(|prefix| {
            candidate.starts_with(prefix) || candidate == prefix.trim_end_matches('/')
        }) || private_dirs
            .iter()
            .any(|dir| !dir.as_os_str().is_empty() && path.starts_with(dir));
        private.then(|| candidate.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_not_inline_values() {
        assert!(is_reference_header("Bearer ${TOKEN}"));
        assert!(!is_reference_header("Bearer abc"));
    }

    #[test]
    fn private_paths_are_recognized() {
        let home = vec![PathBuf::from("/srv/me")];
        assert!(host_private_path("/home/u/bin/server", &[]).is_some());
        assert!(host_private_path("--config=/Users/u/x.json", &[]).is_some());
        assert!(host_private_path("/srv/me/x", &home).is_some());
        assert!(host_private_path("/usr/bin/node", &home).is_none());
        assert!(host_private_path("server.js", &home).is_none());
    }
}
