//! What a resolution is asked ([`RefRequest`]) and what it answers: [`ResolvedRef`], [`TagList`]
//! and where each came from ([`ResolvedFrom`]).
//!
//! Pure data: must never do I/O.

use crate::github::rest::RemoteTag;

/// Where a resolved commit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedFrom {
    /// The ref was already a full commit id.
    Commit,
    /// A cached value that was still fresh.
    FreshCache,
    /// The REST API.
    Rest,
    /// The git protocol (ls-refs).
    GitProtocol,
    /// A stale cached value, used because every live source failed (a warning says so).
    StaleCache,
}

/// A ref resolved to a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRef {
    /// The 40-hex commit, lowercase.
    pub commit: String,
    /// The tag chosen for a version constraint.
    pub tag: Option<String>,
    /// Where the answer came from.
    pub from: ResolvedFrom,
    /// Things the user should know (stale cache used...), for the cli to print.
    pub warnings: Vec<String>,
}

/// Every tag of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagList {
    /// The tags (order as the source gave them).
    pub tags: Vec<RemoteTag>,
    /// Where the list came from.
    pub from: ResolvedFrom,
    /// Things the user should know.
    pub warnings: Vec<String>,
}

impl ResolvedRef {
    /// `commit`, with no tag chosen and nothing to warn about.
    pub(super) fn found(commit: String, from: ResolvedFrom) -> Self {
        ResolvedRef {
            commit,
            tag: None,
            from,
            warnings: Vec::new(),
        }
    }
}

impl TagList {
    /// `tags`, with nothing to warn about.
    pub(super) fn found(tags: Vec<RemoteTag>, from: ResolvedFrom) -> Self {
        TagList {
            tags,
            from,
            warnings: Vec::new(),
        }
    }
}

/// What the user pinned: the lockfile crate's spec classification, reduced to what resolution needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefRequest {
    /// A full commit id.
    Commit(String),
    /// A branch, a tag, or any name GitHub resolves (also a short commit).
    Name(String),
    /// A SemVer constraint matched against the repository's tags.
    Version(String),
    /// Nothing pinned: the highest release tag, else the default branch (`HEAD`).
    Latest,
}

impl RefRequest {
    /// What a manifest pin asks for.
    pub fn from_pin(pin: &agentpack_lockfile::manifest::Pin) -> RefRequest {
        use agentpack_lockfile::manifest::Pin;
        match pin {
            Pin::Unpinned => RefRequest::Latest,
            Pin::Version(constraint) => RefRequest::Version(constraint.as_str().to_owned()),
            Pin::Branch(name) | Pin::Tag(name) | Pin::Ref(name) => RefRequest::Name(name.clone()),
            Pin::Commit(commit) => RefRequest::Commit(commit.as_str().to_owned()),
            // Only `oci://` packages have digest pins; GitHub has no such name.
            Pin::Digest(digest) => RefRequest::Name(digest.clone()),
        }
    }

    /// The text shown in messages (`^1.2`, `main`, a commit, `latest`).
    pub fn describe(&self) -> &str {
        match self {
            RefRequest::Commit(text) | RefRequest::Name(text) | RefRequest::Version(text) => text,
            RefRequest::Latest => "latest",
        }
    }
}
