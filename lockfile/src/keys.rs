//! The key formulas that make a lock written by the existing agentpack key and verify the same way
//! in ours (ADDENDUM "Identity and keys" and "pack.lock serialization").
//!
//! Owns: the `cache_key` of GitHub, path and `local/` mirror packages, `dirhash40` over an
//! already-collected list of files, the project hash, the mode directory component and the MCP
//! `definition` digest. Everything here is a pure function of its arguments: it never walks a
//! directory, canonicalizes a path or reads a file. Builders collect files (skipping symlinks,
//! `.git` and git-ignored files) and canonicalize paths, then call these.

use std::borrow::Cow;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::validate::{CacheKey, CommitSha};

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// The bytes of a path as the key formulas hash them: the raw OS bytes on Unix, UTF-8 (lossy)
/// elsewhere.
fn path_bytes(path: &Path) -> Cow<'_, [u8]> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Cow::Borrowed(path.as_os_str().as_bytes())
    }
    #[cfg(not(unix))]
    {
        match path.to_string_lossy() {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        }
    }
}

/// Trims leading and trailing `/` from an in-repo path; its case is kept.
pub fn normalize_repo_path(path: &str) -> &str {
    path.trim_matches('/')
}

/// `cache_key` of a GitHub package: SHA-256 of
/// `"github:" + lower(owner) + "/" + lower(repo) + "\0" + path + "\0" + lower(commit)`,
/// where `path` has leading/trailing `/` trimmed and keeps its case.
pub fn github_cache_key(owner: &str, repo: &str, path: &str, commit: &CommitSha) -> CacheKey {
    let identity = format!(
        "github:{}/{}",
        owner.to_ascii_lowercase(),
        repo.to_ascii_lowercase()
    );
    CacheKey::from_digest(sha256(&[
        identity.as_bytes(),
        b"\0",
        normalize_repo_path(path).as_bytes(),
        b"\0",
        commit.as_str().as_bytes(),
    ]))
}

/// `cache_key` of an `oci://` package: SHA-256 of
/// `"oci:" + registry + "/" + repository + "\0" + manifest_digest` (all as the lock writes them:
/// lowercase registry and repository, `sha256:<64 hex>`).
pub fn oci_cache_key(registry: &str, repository: &str, manifest_digest: &str) -> CacheKey {
    CacheKey::from_digest(sha256(&[
        b"oci:",
        registry.as_bytes(),
        b"/",
        repository.as_bytes(),
        b"\0",
        manifest_digest.as_bytes(),
    ]))
}

/// `cache_key` of a path dependency: SHA-256 of `"path:" + canonical_dir + "\0" + dirhash40`.
/// `canonical_dir` must already be absolute, symlink-resolved and cleaned (the caller's job).
pub fn path_cache_key(canonical_dir: &Path, dirhash40: &str) -> CacheKey {
    CacheKey::from_digest(sha256(&[
        b"path:",
        &path_bytes(canonical_dir),
        b"\0",
        dirhash40.as_bytes(),
    ]))
}

/// `cache_key` of a `local/` mirror package: SHA-256 of `"local:" + spec + "\0" + dirhash40`.
pub fn local_cache_key(spec: &str, dirhash40: &str) -> CacheKey {
    CacheKey::from_digest(sha256(&[
        b"local:",
        spec.as_bytes(),
        b"\0",
        dirhash40.as_bytes(),
    ]))
}

/// `dirhash40`: the first 40 hex digits of SHA-256 over `relpath + "\0" + bytes` of each regular
/// file, with paths sorted bytewise as strings (`a.txt` before `a/b`). The caller supplies the
/// files already filtered (regular files only, no symlinks, no `.git`, no git-ignored files) with
/// `/`-separated relative paths; the order it supplies them in does not matter.
pub fn dirhash40_from_entries<P, B, I>(entries: I) -> String
where
    P: AsRef<str>,
    B: AsRef<[u8]>,
    I: IntoIterator<Item = (P, B)>,
{
    let mut entries: Vec<(P, B)> = entries.into_iter().collect();
    entries.sort_by(|a, b| a.0.as_ref().as_bytes().cmp(b.0.as_ref().as_bytes()));
    let mut hasher = Sha256::new();
    for (path, bytes) in &entries {
        hasher.update(path.as_ref().as_bytes());
        hasher.update(b"\0");
        hasher.update(bytes.as_ref());
    }
    let digest: [u8; 32] = hasher.finalize().into();
    hex::encode(digest)[..40].to_owned()
}

/// Project hash: the first 8 bytes (16 hex digits) of SHA-256 of the canonical project root.
/// Pass the root already canonicalized (absolute, symlinks resolved, cleaned).
pub fn project_hash(canonical_root: &Path) -> String {
    hex::encode(&sha256(&[&path_bytes(canonical_root)])[..8])
}

/// The directory component a mode stages under: `default` for the default mode, else a dashed
/// lowercase slug of the name, `-`, and the first 8 hex digits of SHA-256 of the name.
///
/// The slug keeps ASCII letters (lowercased) and digits; every other run of characters becomes
/// one `-`; leading and trailing dashes are dropped. A name with no such characters gets the slug
/// `mode`.
pub fn mode_dir_component(mode_name: &str) -> String {
    if mode_name == "default" {
        return "default".to_owned();
    }
    let mut slug = String::new();
    for c in mode_name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    while slug.ends_with('-') {
        slug.pop();
    }
    if slug.is_empty() {
        slug.push_str("mode");
    }
    let digest = sha256(&[mode_name.as_bytes()]);
    format!("{slug}-{}", hex::encode(&digest[..4]))
}

/// The parts of an MCP server definition that its `definition` digest covers. Environment values,
/// headers and OAuth settings are never part of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefinitionInput<'a> {
    /// `type` (`stdio`, `http`, ...), when set.
    pub server_type: Option<&'a str>,
    /// `command`, when set.
    pub command: Option<&'a str>,
    /// `url`, when set.
    pub url: Option<&'a str>,
    /// The arguments, in order.
    pub args: &'a [String],
    /// `cwd`, when set.
    pub cwd: Option<&'a str>,
}

/// The MCP `definition` digest: `"sha256:" + hex(SHA-256)` over NUL-terminated fields: type,
/// command, url (each `""` when unset, else `"=" + value`), then each argument. When `cwd` is
/// set (the docs: "cwd is, when set") one more field `"cwd=" + value` follows the arguments, so
/// a definition without `cwd` digests exactly as the ADDENDUM formula says.
pub fn mcp_definition_digest(input: &DefinitionInput<'_>) -> String {
    let mut hasher = Sha256::new();
    for field in [input.server_type, input.command, input.url] {
        if let Some(value) = field {
            hasher.update(b"=");
            hasher.update(value.as_bytes());
        }
        hasher.update(b"\0");
    }
    for arg in input.args {
        hasher.update(arg.as_bytes());
        hasher.update(b"\0");
    }
    if let Some(cwd) = input.cwd {
        hasher.update(b"cwd=");
        hasher.update(cwd.as_bytes());
        hasher.update(b"\0");
    }
    let digest: [u8; 32] = hasher.finalize().into();
    format!("sha256:{}", hex::encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn github_key_lowercases_identity_keeps_path_case() {
        let commit = CommitSha::parse("8FC7ADD0E2B00906426ADFB1AB9BF0F0BB40DE2D").unwrap();
        let key = github_cache_key("Acme", "Skills", "/Demo/x/", &commit);
        let expected =
            hex_sha(b"github:acme/skills\0Demo/x\08fc7add0e2b00906426adfb1ab9bf0f0bb40de2d");
        assert_eq!(key.as_str(), expected);
        let other = github_cache_key("acme", "skills", "demo/x", &commit);
        assert_ne!(key, other, "path case is part of the key");
    }

    #[test]
    fn path_and_local_keys() {
        assert_eq!(
            path_cache_key(Path::new("/home/u/x"), "abc").as_str(),
            hex_sha(b"path:/home/u/x\0abc")
        );
        assert_eq!(
            local_cache_key("acme/x", "abc").as_str(),
            hex_sha(b"local:acme/x\0abc")
        );
    }

    #[test]
    fn dirhash_sorts_bytewise_and_is_40_hex() {
        let a = dirhash40_from_entries([("a/b", "2"), ("a.txt", "1")]);
        let b = dirhash40_from_entries(vec![
            ("a.txt".to_owned(), b"1".to_vec()),
            ("a/b".to_owned(), b"2".to_vec()),
        ]);
        assert_eq!(a, b);
        assert_eq!(a, hex_sha(b"a.txt\x001a/b\x002")[..40]);
        assert_eq!(
            dirhash40_from_entries(Vec::<(&str, &[u8])>::new()),
            hex_sha(b"")[..40]
        );
    }

    #[test]
    fn project_hash_is_16_hex() {
        assert_eq!(
            project_hash(Path::new("/work/p")),
            hex_sha(b"/work/p")[..16]
        );
    }

    #[test]
    fn mode_dirs() {
        assert_eq!(mode_dir_component("default"), "default");
        let h = &hex_sha(b"Code Review!")[..8];
        assert_eq!(
            mode_dir_component("Code Review!"),
            format!("code-review-{h}")
        );
        let h = &hex_sha(b"--")[..8];
        assert_eq!(mode_dir_component("--"), format!("mode-{h}"));
        assert_ne!(mode_dir_component("a b"), mode_dir_component("a-b"));
    }

    #[test]
    fn definition_digest_fields() {
        let args = vec!["-y".to_owned(), "@playwright/mcp@latest".to_owned()];
        let d = mcp_definition_digest(&DefinitionInput {
            command: Some("npx"),
            args: &args,
            ..Default::default()
        });
        assert_eq!(
            d,
            format!(
                "sha256:{}",
                hex_sha(b"\0=npx\0\0-y\0@playwright/mcp@latest\0")
            )
        );
        let with_cwd = mcp_definition_digest(&DefinitionInput {
            command: Some("npx"),
            args: &args,
            cwd: Some("sub"),
            ..Default::default()
        });
        assert_ne!(d, with_cwd);
        let url = mcp_definition_digest(&DefinitionInput {
            server_type: Some("http"),
            url: Some("https://x"),
            ..Default::default()
        });
        assert_eq!(url, format!("sha256:{}", hex_sha(b"=http\0\0=https://x\0")));
    }
}
