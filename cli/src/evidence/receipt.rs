//! Probe receipts: what one probe observed, bound to the identities of what it probed, under
//! `$AGENTPACK_HOME/projects/<hash>/probe-receipts/` (0700 directory, 0600 files, each written to
//! a temporary file and renamed). Receipts are never rewritten; `latest` is the newest one of an
//! agent, never an older one when the newest does not fit.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::catalog::{Catalog, Sampling};

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Termination {
    /// `exited`, `signaled`, `timed_out` or `stopped` (the probe had what it needed and killed it).
    pub how: String,
    pub exit_code: Option<i32>,
    /// Whether a stream went beyond the capture bound.
    pub truncated: bool,
    pub elapsed_ms: u64,
}

/// The receipt format this agentpack writes and reads.
pub const FORMAT: u32 = 1;

/// The directory under the project's state directory.
pub const DIR: &str = "probe-receipts";

/// The identities a receipt is bound to: the preflight identities, the policy included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundIdentities {
    pub source: String,
    pub lock: Option<String>,
    pub mode: String,
    pub workspace_inputs: Option<String>,
    pub staged_generation: Option<String>,
    pub generation: Option<String>,
    /// The policy digest (policy, strict flag, contract bytes) the probe ran under (`--policy`,
    /// `local` when not given): only a preflight under the same policy attaches the receipt. A
    /// receipt without one (written before policies were always bound) never matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// The client that was run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    pub path: PathBuf,
    /// SHA-256 of the executable's bytes (read, not run).
    pub sha256: String,
    pub version: Option<String>,
}

/// One receipt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    pub format: u32,
    pub id: String,
    pub agent: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub identities: BoundIdentities,
    pub client: Client,
    /// `workspace_session` or `controlled_projection`.
    pub scope: String,
    pub termination: Termination,
    /// `complete`, `failed` (the process or its output), `unknown` (an unvalidated version) or
    /// `timed_out`.
    pub status: String,
    /// Why the status is not `complete`.
    pub reason: Option<String>,
    /// What was observed; only a `complete` receipt has one.
    pub catalog: Option<Catalog>,
    /// The parser that read the output (`claude-init/1`, `codex-prompt-input/1`): a receipt of
    /// another revision is never attached.
    pub adapter: String,
    /// The capability revision of the agent's probe ([`super::adapter::Adapter::capability`]):
    /// what the probe observes. A receipt of an older revision is stale (0: written before
    /// receipts recorded one).
    #[serde(default)]
    pub capability: u32,
    /// How many listings the probe took and why (OpenCode's `debug skill`; none for a client
    /// listed once, or a probe that stopped before it could decide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// SHA-256 of the retained (bounded) stdout and stderr, kept beside the receipt as
    /// `<id>.evidence`: missing or modified evidence makes the receipt unusable.
    pub evidence_digest: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("cannot write the receipt in {dir}: {cause}")]
    Write { dir: PathBuf, cause: std::io::Error },
    #[error(
        "cannot read the receipt {path}: {cause}\n  fix  pass a receipt id, a receipt file or `latest`"
    )]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "{path} is not a receipt this agentpack reads ({problem})\n  fix  run `agentpack probe` again for a current receipt"
    )]
    Format { path: PathBuf, problem: String },
    #[error("there is no successful probe receipt of {agent} in {dir}{}\n  fix  run `agentpack probe --agent {agent}`", skipped_text(.skipped))]
    None {
        agent: String,
        dir: PathBuf,
        skipped: Vec<String>,
    },
}

fn skipped_text(skipped: &[String]) -> String {
    if skipped.is_empty() {
        String::new()
    } else {
        format!(" (passed over: {})", skipped.join(", "))
    }
}

/// The retained evidence of a receipt: its bounded stdout, a separator line, its bounded stderr.
pub fn evidence_bytes(stdout: &[u8], stderr: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(stdout.len() + stderr.len() + 32);
    bytes.extend_from_slice(stdout);
    bytes.extend_from_slice(b"\n--- agentpack probe: stderr ---\n");
    bytes.extend_from_slice(stderr);
    bytes
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The evidence file beside the receipt at `receipt_path`.
pub fn evidence_path(receipt_path: &Path) -> PathBuf {
    receipt_path.with_extension("evidence")
}

/// Writes `receipt` atomically into `dir` (created 0700) as `<id>.json` (0600), its retained
/// evidence first as `<id>.evidence` (0600).
pub fn write(dir: &Path, receipt: &Receipt, evidence: &[u8]) -> Result<PathBuf, ReceiptError> {
    let io = |source| ReceiptError::Write {
        dir: dir.to_path_buf(),
        cause: source,
    };
    crate::private_dir::ensure(dir).map_err(io)?;
    let bytes = serde_json::to_vec_pretty(receipt).map_err(|err| io(std::io::Error::other(err)))?;
    let path = dir.join(format!("{}.json", receipt.id));
    write_file(dir, &evidence_path(&path), evidence).map_err(io)?;
    write_file(dir, &path, &bytes).map_err(io)?;
    Ok(path)
}

/// Writes `bytes` to `path` (in `dir`) through a 0600 temporary file renamed into place.
fn write_file(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    debug_assert_eq!(path.parent(), Some(dir));
    let options = agentpack_fs::WriteOptions::private_file()
        .durability(agentpack_fs::Durability::File)
        .temp(agentpack_fs::TempName::Prefix(".receipt-"));
    agentpack_fs::write_file(path, bytes, &options).map_err(|err| err.source)
}

/// Reads a receipt file.
pub fn read(path: &Path) -> Result<Receipt, ReceiptError> {
    let bytes =
        agentpack_lockfile::read_regular_file(path).map_err(|source| ReceiptError::Read {
            path: path.to_path_buf(),
            cause: source,
        })?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|err| ReceiptError::Format {
            path: path.to_path_buf(),
            problem: err.to_string(),
        })?;
    if value["format"].as_u64() != Some(u64::from(FORMAT)) {
        return Err(ReceiptError::Format {
            path: path.to_path_buf(),
            problem: format!("format {} (this agentpack reads {FORMAT})", value["format"]),
        });
    }
    serde_json::from_value(value).map_err(|err| ReceiptError::Format {
        path: path.to_path_buf(),
        problem: err.to_string(),
    })
}

/// Where `reference` leads: `latest` is the newest successful current-format receipt of `agent`
/// (newer failed or unreadable ones are named in `skipped`, and an older one is never chosen when
/// the newest successful one is stale: freshness is the caller's check), an id in `dir`, or a path.
#[derive(Debug)]
pub struct Located {
    pub path: PathBuf,
    /// Newer receipts `latest` passed over (`id: why`).
    pub skipped: Vec<String>,
    /// The receipt `latest` read to choose it (None for an id or a path: not read yet).
    pub receipt: Option<Receipt>,
}

/// Finds the receipt `reference` names.
pub fn locate(
    dir: &Path,
    reference: &str,
    agent: &str,
    cwd: &Path,
) -> Result<Located, ReceiptError> {
    if reference == "latest" {
        let suffix = format!("-{agent}.json");
        let mut names: Vec<String> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.ends_with(&suffix) && !n.starts_with('.'))
                .collect(),
            Err(_) => Vec::new(),
        };
        names.sort();
        let mut skipped = Vec::new();
        for name in names.into_iter().rev() {
            let path = dir.join(&name);
            let id = name.trim_end_matches(".json").to_owned();
            match read(&path) {
                Ok(receipt) if receipt.status == "complete" => {
                    return Ok(Located {
                        path,
                        skipped,
                        receipt: Some(receipt),
                    });
                }
                Ok(receipt) => skipped.push(format!("{id}: {}", receipt.status)),
                Err(ReceiptError::Format { .. }) => {
                    skipped.push(format!("{id}: not a current-format receipt"))
                }
                Err(_) => skipped.push(format!("{id}: unreadable")),
            }
        }
        return Err(ReceiptError::None {
            agent: agent.to_owned(),
            dir: dir.to_path_buf(),
            skipped,
        });
    }
    let by_id = dir.join(format!("{reference}.json"));
    let path = if !reference.contains('/') && by_id.is_file() {
        by_id
    } else {
        cwd.join(reference)
    };
    Ok(Located {
        path,
        skipped: Vec::new(),
        receipt: None,
    })
}

/// A new receipt id: the creation time (sortable) and the agent.
pub fn new_id(now: std::time::SystemTime, agent: &str) -> String {
    let since = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{:020}-{agent}", since.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn receipt(agent: &str, id: &str, status: &str) -> Receipt {
        Receipt {
            format: FORMAT,
            id: id.to_owned(),
            agent: agent.to_owned(),
            created: String::new(),
            identities: BoundIdentities {
                source: String::new(),
                lock: None,
                mode: "default".to_owned(),
                workspace_inputs: None,
                staged_generation: None,
                generation: None,
                policy: None,
            },
            client: Client {
                path: PathBuf::new(),
                sha256: String::new(),
                version: None,
            },
            scope: String::new(),
            termination: Termination {
                how: "exited".to_owned(),
                exit_code: Some(0),
                truncated: false,
                elapsed_ms: 0,
            },
            status: status.to_owned(),
            reason: None,
            catalog: None,
            adapter: String::new(),
            capability: 0,
            sampling: None,
            evidence_digest: String::new(),
        }
    }

    #[test]
    fn latest_is_the_newest_successful_receipt_of_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("probe-receipts");
        for (agent, id, status) in [
            ("claude", "00000000000000000001-claude", "complete"),
            ("claude", "00000000000000000002-claude", "complete"),
            ("claude", "00000000000000000004-claude", "failed"),
            ("codex", "00000000000000000003-codex", "complete"),
        ] {
            write(&dir, &receipt(agent, id, status), b"out").unwrap();
        }
        std::fs::write(
            dir.join("00000000000000000005-claude.json"),
            "{\"format\":0}",
        )
        .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("00000000000000000001-claude.json")), 0o600);
        let found = locate(&dir, "latest", "claude", &dir).unwrap();
        assert!(found.path.ends_with("00000000000000000002-claude.json"));
        assert_eq!(found.skipped.len(), 2, "{:?}", found.skipped);
        assert!(matches!(
            locate(&dir, "latest", "opencode", &dir),
            Err(ReceiptError::None { .. })
        ));
    }
}
