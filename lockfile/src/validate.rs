//! Digest newtypes with checked parsing, and the integrity errors a lock entry can raise on load.
//!
//! Owns: [`ContentHash`] (`sha256-tree-v1:<64 lowercase hex>`), [`CacheKey`] (64 lowercase hex),
//! [`CommitSha`] (40 hex, stored lowercase), and [`IntegrityError`], whose `Display` is the exact
//! text of the docs' "Integrity and Verification" page. Never reads files and never hashes trees:
//! computing `sha256-tree-v1` is the store's job; this module only checks the *shape* of values and
//! that an entry agrees with itself.

use std::fmt;
use std::path::PathBuf;

/// The algorithm prefix of every [`ContentHash`].
pub const CONTENT_HASH_PREFIX: &str = "sha256-tree-v1:";

/// Why a digest string was refused by `parse`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} must be {expected}, found {found:?}")]
pub struct DigestError {
    /// The kind of value (`content_hash`, `cache_key`, `commit`).
    pub what: &'static str,
    /// The shape that is accepted.
    pub expected: &'static str,
    /// The refused input.
    pub found: String,
}

impl DigestError {
    fn refused(what: &'static str, expected: &'static str, found: &str) -> DigestError {
        DigestError {
            what,
            expected,
            found: found.to_owned(),
        }
    }
}

/// `Display` (the text as it is) and `TryFrom<&str>` (its checked `parse`) of each digest newtype.
macro_rules! digest_text_impls {
    ($($name:ident),+) => {$(
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = DigestError;
            fn try_from(s: &str) -> Result<Self, Self::Error> {
                Self::parse(s)
            }
        }
    )+};
}

digest_text_impls!(ContentHash, CacheKey, CommitSha);

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A `sha256-tree-v1` content hash: the prefix followed by exactly 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentHash(String);

impl ContentHash {
    /// Checks `s` and wraps it. Anything but the prefix plus 64 lowercase hex digits is refused
    /// (unknown or missing prefix, short or uppercase digest, empty string).
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        match s.strip_prefix(CONTENT_HASH_PREFIX) {
            Some(hex) if is_lower_hex(hex, 64) => Ok(Self(s.to_owned())),
            _ => Err(DigestError::refused(
                "content_hash",
                "sha256-tree-v1:<64 lowercase hex digits>",
                s,
            )),
        }
    }

    /// Builds the hash from a raw 32-byte SHA-256 digest.
    pub fn from_digest(digest: [u8; 32]) -> Self {
        Self(format!("{CONTENT_HASH_PREFIX}{}", hex::encode(digest)))
    }

    /// The full text, prefix included.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits after the prefix.
    pub fn hex(&self) -> &str {
        &self.0[CONTENT_HASH_PREFIX.len()..]
    }
}

/// A cache slot name: 64 lowercase hex digits (a SHA-256 of the package identity).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheKey(String);

impl CacheKey {
    /// Checks `s` is exactly 64 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        if is_lower_hex(s, 64) {
            Ok(Self(s.to_owned()))
        } else {
            Err(DigestError::refused(
                "cache_key",
                "<64 lowercase hex digits>",
                s,
            ))
        }
    }

    /// Builds the key from a raw 32-byte SHA-256 digest.
    pub fn from_digest(digest: [u8; 32]) -> Self {
        Self(hex::encode(digest))
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 8 hex digits followed by `…`, as error messages show a key.
    pub fn short(&self) -> String {
        format!("{}…", &self.0[..8])
    }
}

/// A full git commit id: 40 hex digits. Uppercase input is accepted and stored lowercase.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitSha(String);

impl CommitSha {
    /// Checks `s` is exactly 40 hex digits (either case) and stores it lowercase.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        if s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(s.to_ascii_lowercase()))
        } else {
            Err(DigestError::refused("commit", "<40 hex digits>", s))
        }
    }

    /// True when `s` would parse as a commit (40 hex digits).
    pub fn is_commit(s: &str) -> bool {
        Self::parse(s).is_ok()
    }

    /// The 40 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A lock entry that fails its integrity checks on load. The `Display` text is the docs' message,
/// line for line; every command refuses such a lock and none rewrites it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityError {
    /// `content_hash` is present but not `sha256-tree-v1:<64 lowercase hex>`.
    #[error(
        "invalid content_hash in pack.lock: {module}\n  found     {found:?}\n  expected  sha256-tree-v1:<64 lowercase hex digits>\n  lockfile  {}\n  fix       restore pack.lock from version control, or upgrade agentpack if a newer version wrote it",
        lockfile.display()
    )]
    InvalidContentHash {
        /// The entry's module ID.
        module: String,
        /// The value found in the lock.
        found: String,
        /// The lock file's path.
        lockfile: PathBuf,
    },
    /// A GitHub entry with a content hash whose `cache_key` is not the key of its `commit`.
    #[error(
        "inconsistent pack.lock entry: {module}\n  commit     {commit}\n  cache_key  {}\n  expected   {}   (the cache_key of that commit)\n  fix        restore pack.lock from version control; move a pin with `agentpack update` or `agentpack lock --update`",
        cache_key.short(),
        expected.short()
    )]
    Inconsistent {
        /// The entry's module ID.
        module: String,
        /// The commit the entry records.
        commit: CommitSha,
        /// The cache key the entry records.
        cache_key: CacheKey,
        /// The cache key computed from the entry's owner, repo, path and commit.
        expected: CacheKey,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn content_hash_accepts_only_prefix_and_64_lower_hex() {
        let ok = format!("sha256-tree-v1:{HEX64}");
        assert_eq!(ContentHash::parse(&ok).unwrap().hex(), HEX64);
        for bad in [
            String::new(),
            HEX64.to_owned(),
            format!("sha256-{HEX64}"),
            format!("sha256-tree-v2:{HEX64}"),
            format!("sha256-tree-v1:{}", &HEX64[..63]),
            format!("sha256-tree-v1:{HEX64}0"),
            format!("sha256-tree-v1:{}", HEX64.to_uppercase()),
            format!(" sha256-tree-v1:{HEX64}"),
        ] {
            assert!(ContentHash::parse(&bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn cache_key_and_commit_shapes() {
        assert!(CacheKey::parse(HEX64).is_ok());
        assert!(CacheKey::parse(&HEX64.to_uppercase()).is_err());
        assert!(CacheKey::parse(&HEX64[..40]).is_err());
        let c = CommitSha::parse(&HEX64[..40].to_uppercase()).unwrap();
        assert_eq!(c.as_str(), &HEX64[..40]);
        assert!(CommitSha::parse(&HEX64[..39]).is_err());
        assert!(CommitSha::parse("g123456789012345678901234567890123456789").is_err());
    }

    #[test]
    fn from_digest_round_trips() {
        let h = ContentHash::from_digest([0xab; 32]);
        assert_eq!(ContentHash::parse(h.as_str()).unwrap(), h);
        let k = CacheKey::from_digest([0x01; 32]);
        assert_eq!(k.short(), "01010101…");
    }
}
