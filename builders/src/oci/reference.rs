//! OCI addresses: `oci://host[:port]/path/to/repo`, tags, digests, and the tag of a content identity.
//!
//! Parsing only; nothing here touches the network. Repository names follow the distribution
//! spec's grammar (lowercase components of `[a-z0-9]` joined by `.`, `_`, `__` or dashes), tags
//! `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`, digests `sha256:<64 lowercase hex>`.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use super::OciError;

/// The scheme of every OCI address agentpack reads.
pub const SCHEME: &str = "oci://";

/// A repository on a registry: `oci://ghcr.io/acme/skills`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OciRepository {
    /// `host[:port]`, as written (`ghcr.io`, `127.0.0.1:5000`).
    pub registry: String,
    /// `path/to/repo`.
    pub repository: String,
}

/// A manifest within a repository: a tag or a `sha256:` digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OciReference {
    /// A tag (`1.2.0`, `latest`).
    Tag(String),
    /// A manifest digest (`sha256:<64 hex>`).
    Digest(String),
}

/// What a valid tag is, for the error.
const TAG_RULE: &str =
    "a tag is 1 to 128 characters of [A-Za-z0-9_.-], not starting with `.` or `-`";

/// What a valid digest is, for the error.
const DIGEST_RULE: &str = "a digest is sha256: and 64 lowercase hex digits";

/// The error for `input`, which it names without the userinfo of any URL in it.
fn invalid(input: &str, reason: impl Into<String>) -> OciError {
    OciError::InvalidReference {
        input: agentpack_harness::render::credentials::redact_url_userinfo(input),
        reason: reason.into(),
    }
}

/// Is `tag` a valid OCI tag (`[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`)?
pub fn is_valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    tag.len() <= 128
        && (first.is_ascii_alphanumeric() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Is `digest` a `sha256:<64 lowercase hex>` digest?
pub fn is_valid_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

fn is_valid_registry(registry: &str) -> bool {
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return false;
        };
        if inner.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => ("v6", Some(port)),
                None => return false,
            },
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    let port_ok = port.is_none_or(|port| {
        !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
    });
    port_ok
        && !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

impl OciReference {
    /// A tag, checked.
    pub fn tag(tag: &str) -> Result<OciReference, OciError> {
        Self::checked(tag, is_valid_tag, OciReference::Tag, TAG_RULE)
    }

    /// A digest, checked.
    pub fn digest(digest: &str) -> Result<OciReference, OciError> {
        Self::checked(digest, is_valid_digest, OciReference::Digest, DIGEST_RULE)
    }

    /// `text` as the reference `make` builds when `valid` accepts it, else the error saying `rule`.
    fn checked(
        text: &str,
        valid: fn(&str) -> bool,
        make: fn(String) -> OciReference,
        rule: &str,
    ) -> Result<OciReference, OciError> {
        if valid(text) {
            Ok(make(text.to_owned()))
        } else {
            Err(invalid(text, rule))
        }
    }

    /// The tag or digest as written in a URL (`1.2.0`, `sha256:...`).
    pub fn as_str(&self) -> &str {
        match self {
            OciReference::Tag(tag) => tag,
            OciReference::Digest(digest) => digest,
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl OciRepository {
    /// `oci://host/repo:tag` or `oci://host/repo@sha256:...`, for messages.
    pub fn display_with(&self, reference: &OciReference) -> String {
        match reference {
            OciReference::Tag(tag) => format!("{self}:{tag}"),
            OciReference::Digest(digest) => format!("{self}@{digest}"),
        }
    }

    /// The `oci-client` reference of a manifest in this repository.
    pub(crate) fn client_reference(&self, reference: &OciReference) -> oci_client::Reference {
        match reference {
            OciReference::Tag(tag) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            OciReference::Digest(digest) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
        }
    }

    /// The registry's host without the port (`127.0.0.1`, `ghcr.io`, `::1`).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }
}

/// The host of `host[:port]` (brackets of an IPv6 address removed).
pub fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => registry,
    }
}

fn split_repository(input: &str, rest: &str) -> Result<OciRepository, OciError> {
    let Some((registry, repository)) = rest.split_once('/') else {
        return Err(invalid(input, "it names no repository after the registry"));
    };
    if !is_valid_registry(registry) {
        return Err(invalid(input, format!("{registry:?} is not a host[:port]")));
    }
    if repository.is_empty()
        || !repository
            .split('/')
            .all(agentpack_lockfile::module_id::is_oci_repository_component)
    {
        return Err(invalid(
            input,
            format!("{repository:?} is not a repository name (lowercase letters, digits and . _ - separators, components joined by /)"),
        ));
    }
    Ok(OciRepository {
        registry: registry.to_owned(),
        repository: repository.to_owned(),
    })
}

impl FromStr for OciRepository {
    type Err = OciError;

    /// `oci://host[:port]/path/to/repo` (no tag or digest).
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (repository, reference) = parse_oci_url(input)?;
        if let Some(reference) = reference {
            return Err(invalid(
                input,
                format!("a repository is expected here, without the tag or digest {reference}"),
            ));
        }
        Ok(repository)
    }
}

impl fmt::Display for OciRepository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)
    }
}

/// Parses `oci://host[:port]/repo[:tag|@sha256:hex]`.
pub fn parse_oci_url(input: &str) -> Result<(OciRepository, Option<OciReference>), OciError> {
    let Some(rest) = input.strip_prefix(SCHEME) else {
        return Err(invalid(input, "it does not start with oci://"));
    };
    if rest
        .split('/')
        .next()
        .is_some_and(|authority| authority.contains('@'))
    {
        return Err(invalid(
            input,
            "credentials do not belong in an oci:// address (it is written to pack.lock and shown in messages); give them with AGENTPACK_OCI_TOKEN or `docker login`",
        ));
    }
    if let Some((path, digest)) = rest.split_once('@') {
        let repository = split_repository(input, path)?;
        return Ok((repository, Some(OciReference::digest(digest)?)));
    }
    let last_slash = rest.rfind('/').unwrap_or(0);
    match rest[last_slash..].find(':') {
        Some(colon) if last_slash > 0 => {
            let at = last_slash + colon;
            let repository = split_repository(input, &rest[..at])?;
            Ok((repository, Some(OciReference::tag(&rest[at + 1..])?)))
        }
        _ => Ok((split_repository(input, rest)?, None)),
    }
}

/// The tag a content identity (`sha256-tree-v1:<hex>`, `sha256-npm-tree-v1:<hex>`) is pushed
/// under: the identity with every character a tag cannot hold replaced by `-`
/// (`sha256-tree-v1-<hex>`); an identity too long for a tag becomes `sha256-` and the SHA-256 of it.
pub fn identity_tag(content_identity: &str) -> String {
    let mapped: String = content_identity
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if is_valid_tag(&mapped) {
        return mapped;
    }
    format!(
        "sha256-{}",
        hex::encode(Sha256::digest(content_identity.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_parse_and_print_back() {
        for input in [
            "oci://ghcr.io/acme/skills",
            "oci://127.0.0.1:5000/team/cache",
            "oci://localhost:5000/a",
            "oci://[::1]:5000/a/b-c/d__e",
        ] {
            let repository: OciRepository = input.parse().unwrap();
            assert_eq!(repository.to_string(), input);
        }
        let repository: OciRepository = "oci://127.0.0.1:5000/team/cache".parse().unwrap();
        assert_eq!(repository.registry, "127.0.0.1:5000");
        assert_eq!(repository.repository, "team/cache");
        assert_eq!(repository.host(), "127.0.0.1");
        assert_eq!(host_of("[::1]:5000"), "::1");
    }

    #[test]
    fn bad_addresses_are_refused_with_the_reason() {
        for (input, reason) in [
            ("https://ghcr.io/a", "oci://"),
            ("oci://ghcr.io", "no repository"),
            ("oci://ghcr.io/Acme", "repository name"),
            ("oci://ghcr.io/a//b", "repository name"),
            ("oci://ghcr.io/a:tag", "without the tag"),
            ("oci://gh cr.io/a", "host[:port]"),
        ] {
            let error = input.parse::<OciRepository>().unwrap_err().to_string();
            assert!(error.contains(reason), "{input}: {error}");
        }
    }

    #[test]
    fn credentials_in_the_address_are_refused_and_never_shown() {
        for input in [
            "oci://user:s3cret-pw@ghcr.io/acme/skills",
            "oci://user:s3cret-pw@ghcr.io/acme/skills:1.0.0",
            "oci://s3cret-pw@127.0.0.1:5000/a@sha256:00",
        ] {
            let error = parse_oci_url(input).unwrap_err().to_string();
            assert!(error.contains("AGENTPACK_OCI_TOKEN"), "{error}");
            assert!(!error.contains("s3cret-pw"), "{error}");
        }
    }

    #[test]
    fn urls_with_tags_and_digests() {
        let (repository, reference) = parse_oci_url("oci://127.0.0.1:5000/a/b:1.2.0").unwrap();
        assert_eq!(repository.registry, "127.0.0.1:5000");
        assert_eq!(repository.repository, "a/b");
        assert_eq!(reference, Some(OciReference::Tag("1.2.0".into())));
        let digest = format!("sha256:{}", "a".repeat(64));
        let (_, reference) = parse_oci_url(&format!("oci://h:1/a@{digest}")).unwrap();
        assert_eq!(reference, Some(OciReference::Digest(digest)));
        assert!(parse_oci_url("oci://h/a@sha256:zz").is_err());
        assert!(parse_oci_url("oci://h/a:-bad").is_err());
        let (_, none) = parse_oci_url("oci://h:5000/a").unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn identity_tags_are_valid_tags() {
        let hash = format!("sha256-tree-v1:{}", "0f".repeat(32));
        let tag = identity_tag(&hash);
        assert_eq!(tag, format!("sha256-tree-v1-{}", "0f".repeat(32)));
        assert!(is_valid_tag(&tag));
        let npm = identity_tag(&format!("sha256-npm-tree-v1:{}", "ab".repeat(32)));
        assert!(is_valid_tag(&npm));
        let long = identity_tag(&"x".repeat(300));
        assert!(long.starts_with("sha256-") && is_valid_tag(&long));
        assert!(is_valid_tag(&identity_tag(".hidden")));
        assert_ne!(identity_tag(".a"), identity_tag("-a"));
    }
}
