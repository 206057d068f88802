//! Subresource-integrity strings (`sha512-<base64>`) as npm records them, and checking bytes
//! against them.
//!
//! Pure. It must never accept bytes it could not check: an integrity with no algorithm it knows
//! (sha256, sha384, sha512) is a failure, not a pass.

use base64::Engine as _;
use sha2::{Digest, Sha256, Sha384, Sha512};

/// Why bytes do not match an integrity string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityMismatch {
    /// No hash in the string uses an algorithm agentpack checks.
    #[error("integrity `{0}` uses no algorithm agentpack can check (sha512, sha384, sha256)")]
    Unsupported(String),
    /// The bytes hash to something else.
    #[error("expected {expected}, got {actual}")]
    Differs {
        /// The recorded integrity.
        expected: String,
        /// The bytes' integrity in the same algorithm.
        actual: String,
    },
}

/// The `sha512-<base64>` of `bytes`.
pub fn sha512_integrity(bytes: &[u8]) -> String {
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(bytes))
    )
}

/// The hashes of an SRI string (several may be space-separated) whose algorithm agentpack checks,
/// in order, each with its strength (sha512 3, sha384 2, sha256 1): `(strength, algorithm, base64
/// digest)`, options (`?...`) dropped.
fn checked_hashes(integrity: &str) -> impl Iterator<Item = (u8, &str, &str)> {
    integrity.split_whitespace().filter_map(|item| {
        let (algorithm, value) = item.split_once('-')?;
        let strength = match algorithm {
            "sha512" => 3,
            "sha384" => 2,
            "sha256" => 1,
            _ => return None,
        };
        Some((
            strength,
            algorithm,
            value.split('?').next().unwrap_or(value),
        ))
    })
}

/// The first item of the highest strength.
fn first_strongest<T>(items: impl Iterator<Item = (u8, T)>) -> Option<T> {
    items
        .fold(None, |best: Option<(u8, T)>, (strength, item)| match best {
            Some((kept, _)) if kept >= strength => best,
            _ => Some((strength, item)),
        })
        .map(|(_, item)| item)
}

/// The strongest hash of an SRI string (several may be space-separated) whose algorithm agentpack
/// checks: `(algorithm, base64 digest)`, options (`?...`) dropped; `None` when there is none.
pub fn strongest(integrity: &str) -> Option<(&str, &str)> {
    first_strongest(
        checked_hashes(integrity)
            .map(|(strength, algorithm, value)| (strength, (algorithm, value))),
    )
}

/// Like [`strongest`], among the hashes whose digest is valid base64: `(algorithm, digest bytes)`.
pub fn strongest_decoded(integrity: &str) -> Option<(&str, Vec<u8>)> {
    first_strongest(
        checked_hashes(integrity).filter_map(|(strength, algorithm, value)| {
            let digest = base64::engine::general_purpose::STANDARD
                .decode(value)
                .ok()?;
            Some((strength, (algorithm, digest)))
        }),
    )
}

/// Checks `bytes` against the strongest hash of an SRI string (several may be space-separated).
pub fn check(integrity: &str, bytes: &[u8]) -> Result<(), IntegrityMismatch> {
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    let Some((algo, expected)) = strongest(integrity) else {
        return Err(IntegrityMismatch::Unsupported(integrity.to_owned()));
    };
    let actual = match algo {
        "sha512" => b64(&Sha512::digest(bytes)),
        "sha384" => b64(&Sha384::digest(bytes)),
        _ => b64(&Sha256::digest(bytes)),
    };
    if actual == expected {
        Ok(())
    } else {
        Err(IntegrityMismatch::Differs {
            expected: integrity.to_owned(),
            actual: format!("{algo}-{actual}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks() {
        let good = sha512_integrity(b"abc");
        assert!(check(&good, b"abc").is_ok());
        assert!(matches!(
            check(&good, b"abd"),
            Err(IntegrityMismatch::Differs { .. })
        ));
        assert!(matches!(
            check("sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0=", b"abc"),
            Err(IntegrityMismatch::Unsupported(_))
        ));
        assert!(check(&format!("sha1-x {good}"), b"abc").is_ok());
    }
}
