//! Secret-looking files in a local package: what looks like a private key or an `.env` file, the
//! package's own `allow-secret-files` list, and the refusal naming the files.
//!
//! Must never read more of a file than its first bytes, and never let a listed file through unless
//! the package itself allows it.

use std::path::Path;

use super::*;

/// The key of a package's own `agentpack.toml` listing files that look like secrets but are meant
/// to be shipped (`allow-secret-files = [".env.example", "certs/test.pem"]`, package-relative).
pub const ALLOW_SECRET_FILES_KEY: &str = "allow-secret-files";

/// Is the file at `relative` (with `absolute` to peek into) one that looks like a private key or an
/// environment file? `id_rsa`, `id_dsa`, `id_ecdsa`, `id_ed25519` (and their `_sk` forms), `.env`,
/// `.env.*` (except the templates `.env.example`, `.env.sample`, `.env.template`, `.env.dist`), and
/// `*.pem` / `*.key` files with a `PRIVATE KEY` header.
pub fn looks_like_secret(relative: &str, absolute: &Path) -> bool {
    const KEYS: [&str; 6] = [
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "id_ecdsa_sk",
        "id_ed25519_sk",
    ];
    let name = relative.rsplit('/').next().unwrap_or(relative);
    if KEYS.contains(&name) || name == ".env" {
        return true;
    }
    if let Some(suffix) = name.strip_prefix(".env.") {
        return !matches!(suffix, "example" | "sample" | "template" | "dist");
    }
    if name.ends_with(".pem") || name.ends_with(".key") {
        return has_private_key_header(absolute);
    }
    false
}

pub(super) fn has_private_key_header(path: &Path) -> bool {
    use std::io::Read as _;
    let Ok(file) = open_regular(path) else {
        return false;
    };
    let mut head = Vec::new();
    if file.take(64 * 1024).read_to_end(&mut head).is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----")
}

/// The files of `source/agentpack.toml`'s `allow-secret-files` (package-relative, cleaned).
pub(super) fn allowed_secret_files(source: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(source.join("agentpack.toml")) else {
        return Vec::new();
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    table
        .get(ALLOW_SECRET_FILES_KEY)
        .and_then(toml::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(toml::Value::as_str)
                .map(|item| {
                    item.trim_start_matches("./")
                        .trim_end_matches('/')
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Refuses secret-looking files of `entries` that the package's opt-in does not list.
pub(super) fn refuse_secret_files(
    module: &str,
    source: &Path,
    entries: &[(String, LocalEntry)],
) -> Result<(), LocalPackageError> {
    let allowed = allowed_secret_files(source);
    let found: Vec<&str> = entries
        .iter()
        .filter_map(|(relative, entry)| match entry {
            LocalEntry::File(absolute) => Some((relative.as_str(), absolute)),
            LocalEntry::Link(_) => None,
        })
        .filter(|(relative, absolute)| looks_like_secret(relative, absolute))
        .filter(|(relative, _)| !allowed.iter().any(|a| a == relative))
        .map(|(relative, _)| relative)
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(LocalPackageError::SecretFiles {
        module: module.to_owned(),
        source_dir: source.to_path_buf(),
        files: crate::limits::truncate_list(&found, crate::limits::LISTED_IN_MESSAGES),
        count: found.len(),
    })
}
