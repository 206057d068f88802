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

/// The strongest hash of an SRI string (several may be space-separated) whose algorithm agentpack
/// checks: `(algorithm, base64 digest)`, options (`?...`) dropped; `None` when there is none.
pub fn strongest(integrity: &str) -> Option<(&str, &str)> {
    let mut best: Option<(u8, &str, &str)> = None;
    for item in integrity.split_whitespace() {
        let Some((algo, value)) = item.split_once('-') else {
            continue;
        };
        let value = value.split('?').next().unwrap_or(value);
        let rank = match algo {
            "sha512" => 3,
            "sha384" => 2,
            "sha256" => 1,
            _ => continue,
        };
        if best.is_none_or(|(r, _, _)| rank > r) {
            best = Some((rank, algo, value));
        }
    }
    best.map(|(_, algo, value)| (algo, value))
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
