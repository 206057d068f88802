//! Names of things in the store: [`StorePathName`] (`<32 hex>-<label>`), [`StorePath`] (a name plus
//! where it sits) and [`BlobId`] (the BLAKE3 of a blob's content).
//!
//! Pure: parsing, validation and formatting only (input-addressed names read the effective uid, an
//! input); never touches the filesystem.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Result, StoreError};
use crate::tree_hash::TreeHash;

/// Longest label kept in a store path name.
pub const MAX_LABEL_LEN: usize = 100;
/// Hex digits of the hash part of a store path name.
pub const NAME_HASH_LEN: usize = 32;

/// The name of a store path: `<32 lowercase hex>-<label>`.
///
/// * a **package** (content-addressed) takes the first 32 hex digits of its `sha256-tree-v1` digest;
/// * a **built** path (input-addressed, e.g. a generation) takes the first 32 hex digits of the BLAKE3
///   of its inputs, so its final path is known before it is built.
///
/// The label is for humans (`[A-Za-z0-9+._-]`, at most 100 characters, not starting with `.`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorePathName(String);

impl StorePathName {
    /// Content-addressed name of a package tree.
    pub fn from_tree_hash(hash: &TreeHash, label: &str) -> Self {
        let hex = hash.hex();
        StorePathName(format!(
            "{}-{}",
            &hex[..NAME_HASH_LEN],
            sanitize_label(label)
        ))
    }

    /// Input-addressed name: the BLAKE3 of `inputs` (any canonical encoding of what the build depends
    /// on) and of the user it is built for ([`StorePathName::from_inputs_for`] with this process's
    /// effective uid).
    pub fn from_inputs(inputs: &[u8], label: &str) -> Self {
        Self::from_inputs_for(inputs, label, nix::unistd::geteuid().as_raw())
    }

    /// Input-addressed name of what user `uid` builds from `inputs`. The user is an input: in a store
    /// shared by several users an input-addressed path can only be trusted by the user who built it
    /// (nothing but building it again could tell its content is right, and its owner could change it),
    /// so each user builds their own and never finds another user's under the name they need. Root's
    /// names (uid 0) are the plain hash of the inputs, trusted by everyone.
    pub fn from_inputs_for(inputs: &[u8], label: &str, uid: u32) -> Self {
        let hex = if uid == 0 {
            blake3::hash(inputs).to_hex()
        } else {
            let mut hasher = blake3::Hasher::new();
            hasher.update(inputs);
            hasher.update(format!("\0agentpack-user {uid}").as_bytes());
            hasher.finalize().to_hex()
        };
        StorePathName(format!(
            "{}-{}",
            &hex[..NAME_HASH_LEN],
            sanitize_label(label)
        ))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 32 hex digits before the first `-`.
    pub fn hash_part(&self) -> &str {
        &self.0[..NAME_HASH_LEN]
    }

    /// The label after the hash.
    pub fn label(&self) -> &str {
        &self.0[NAME_HASH_LEN + 1..]
    }
}

/// Make `label` usable in a store path name: other characters become `-`, a leading `.` is dropped,
/// at most [`MAX_LABEL_LEN`] characters, `unnamed` when nothing is left.
pub fn sanitize_label(label: &str) -> String {
    let mut out: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(MAX_LABEL_LEN)
        .collect();
    while out.starts_with('.') {
        out.remove(0);
    }
    if out.is_empty() {
        out.push_str("unnamed");
    }
    out
}

impl FromStr for StorePathName {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self> {
        let invalid = |reason| StoreError::InvalidStorePathName {
            found: text.to_owned(),
            reason,
        };
        if text.len() < NAME_HASH_LEN + 2 {
            return Err(invalid("too short"));
        }
        let (hash, rest) = text.split_at(NAME_HASH_LEN);
        if !hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid("must start with 32 lowercase hex digits"));
        }
        let Some(label) = rest.strip_prefix('-') else {
            return Err(invalid("missing '-' after the hash"));
        };
        if label.is_empty()
            || label.len() > MAX_LABEL_LEN
            || label.starts_with('.')
            || sanitize_label(label) != label
        {
            return Err(invalid(
                "the label must be 1-100 characters of [A-Za-z0-9+._-], not starting with '.'",
            ));
        }
        Ok(StorePathName(text.to_owned()))
    }
}

impl fmt::Display for StorePathName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for StorePathName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StorePathName({})", self.0)
    }
}

impl serde::Serialize for StorePathName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// A published store path: its name and its absolute location.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct StorePath {
    name: StorePathName,
    path: PathBuf,
}

impl StorePath {
    pub(crate) fn new(name: StorePathName, path: PathBuf) -> Self {
        StorePath { name, path }
    }

    /// The store path's name.
    pub fn name(&self) -> &StorePathName {
        &self.name
    }

    /// The absolute directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for StorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

impl serde::Serialize for StorePath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.path.display())
    }
}

/// The BLAKE3 of a blob's content. The same content has one id whatever its execute bit; the store keeps
/// the executable variant in a separate file (suffix `x`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobId([u8; 32]);

impl BlobId {
    /// The id of `content`.
    pub fn of(content: &[u8]) -> Self {
        BlobId(*blake3::hash(content).as_bytes())
    }

    pub(crate) fn from_hash(hash: blake3::Hash) -> Self {
        BlobId(*hash.as_bytes())
    }

    /// 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The blob's file name (`<hex>` or `<hex>x`) and its shard (`<first 2 hex>`).
    pub(crate) fn file_name(&self, executable: bool) -> (String, String) {
        let hex = self.hex();
        let shard = hex[..2].to_owned();
        let name = if executable { format!("{hex}x") } else { hex };
        (shard, name)
    }
}

impl FromStr for BlobId {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Self> {
        let invalid = || StoreError::InvalidBlobId {
            found: text.to_owned(),
        };
        if text.len() != 64
            || !text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).map_err(|_| invalid())?;
        Ok(BlobId(bytes))
    }
}

impl fmt::Display for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobId({})", self.hex())
    }
}

impl serde::Serialize for BlobId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.hex())
    }
}

impl<'de> serde::Deserialize<'de> for BlobId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl<'de> serde::Deserialize<'de> for StorePathName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_sanitize() {
        let name = StorePathName::from_inputs(b"x", "my package/1");
        assert_eq!(name.label(), "my-package-1");
        assert_eq!(name.as_str().parse::<StorePathName>().unwrap(), name);
        assert!("abc-x".parse::<StorePathName>().is_err());
        assert!(format!("{}-.hidden", "0".repeat(32))
            .parse::<StorePathName>()
            .is_err());
        assert_eq!(sanitize_label("..."), "unnamed");
        let root = StorePathName::from_inputs_for(b"x", "g", 0);
        assert_eq!(root.hash_part(), &blake3::hash(b"x").to_hex()[..32]);
        assert_ne!(StorePathName::from_inputs_for(b"x", "g", 1000), root);
        assert_ne!(
            StorePathName::from_inputs_for(b"x", "g", 1000),
            StorePathName::from_inputs_for(b"x", "g", 1001)
        );
    }
}
