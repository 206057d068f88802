//! `agentpack support export RECEIPT --output FILE`: a redacted diagnostic capsule of one probe
//! receipt, to share with a maintainer. It keeps diagnostic codes, evidence grades, coverage
//! counts, status, termination kind and public client versions; it never copies paths, native
//! messages (`reason`), remedies, artifact or hook names, native ids, identities or any digest
//! (they can be dictionary-tested against private names), nor the retained evidence. It prints
//! what it left out (counts per kind) before writing, and writes the file create-new (a temporary
//! file linked into place without replacing): an existing output file is refused, unchanged.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{json, Value};

use super::diff;
use crate::context::Context;
use crate::evidence::receipt;
use crate::output;

/// The capsule format this agentpack writes.
pub const CAPSULE_FORMAT: u32 = 1;

#[derive(Debug, Args)]
pub struct SupportArgs {
    #[command(subcommand)]
    pub action: SupportAction,
}

#[derive(Debug, Subcommand)]
pub enum SupportAction {
    /// Write a redacted diagnostic capsule of a probe receipt (refuses an existing file).
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The receipt: an id, a receipt file, or `latest` (the newest successful one of any agent).
    pub receipt: String,
    /// The capsule file to create (never overwritten).
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
}

/// What the capsule left out, counted per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Omitted(pub BTreeMap<&'static str, usize>);

impl Omitted {
    fn add(&mut self, kind: &'static str, n: usize) {
        if n > 0 {
            *self.0.entry(kind).or_default() += n;
        }
    }
}

/// A version as clients publish it (digits and dots), else `None`.
fn public_version(value: &Value) -> Option<String> {
    let text = value.as_str()?;
    let ok = !text.is_empty()
        && text.len() <= 32
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.split('.').all(|p| !p.is_empty());
    ok.then(|| text.to_owned())
}

/// `value` when it is one of `known`, else `None`.
fn vocabulary(value: &Value, known: &[&str]) -> Option<String> {
    value
        .as_str()
        .filter(|s| known.contains(s))
        .map(str::to_owned)
}

const AGENTS: &[&str] = &super::PROBED_NAMES;
const STATUSES: &[&str] = &["complete", "failed", "unknown", "timed_out"];
const SCOPES: &[&str] = &["workspace_session", "controlled_projection"];
const CATEGORIES: &[&str] = &["skill", "command", "agent"];
const WINNERS: &[&str] = &["package", "other"];
const TERMINATIONS: &[&str] = &["exited", "signaled", "timed_out", "stopped"];
const HOOK_EVENTS: &[&str] = &[
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "Notification",
];
const HOOK_OUTCOMES: &[&str] = &["success", "error", "failed", "cancelled", "blocked"];

/// The capsule of `receipt` (its JSON value) and what it left out; `evidence_intact` is whether
/// the retained evidence still has the recorded digest. Pure.
pub fn capsule(receipt: &Value, evidence_intact: bool) -> (Value, Omitted) {
    let mut omitted = Omitted::default();
    let status = vocabulary(&receipt["status"], STATUSES);
    let complete = status.as_deref() == Some("complete");
    let mut codes = Vec::new();
    codes.push(match status.as_deref() {
        Some("complete") => "PROBE_COMPLETE",
        Some("unknown") => "PROBE_UNKNOWN_VERSION",
        Some("timed_out") => "PROBE_TIMED_OUT",
        Some("failed") if receipt["termination"]["truncated"] == true => "PROBE_OUTPUT_TRUNCATED",
        Some("failed") => "PROBE_FAILED",
        _ => "PROBE_STATUS_UNRECOGNIZED",
    });
    codes.push(if evidence_intact {
        "EVIDENCE_INTACT"
    } else {
        "EVIDENCE_UNAVAILABLE"
    });
    if receipt["identities"]["policy"].is_string() {
        codes.push("RECEIPT_POLICY_BOUND");
    }
    // Left out: every path, message, identity and digest.
    if receipt["client"]["path"].is_string() {
        omitted.add("paths", 1);
    }
    if receipt["reason"].is_string() {
        omitted.add("native messages", 1);
    }
    let identities = receipt["identities"]
        .as_object()
        .map_or(0, |o| o.values().filter(|v| !v.is_null()).count());
    omitted.add("identities and digests", identities);
    for digest in [&receipt["client"]["sha256"], &receipt["evidence_digest"]] {
        if digest.is_string() {
            omitted.add("identities and digests", 1);
        }
    }
    omitted.add("evidence files", 1);
    // How many listings were taken is a count; why names a skill.
    let samples = receipt["sampling"]["samples"].as_u64();
    if receipt["sampling"]["reason"].is_string() {
        omitted.add("sampling reasons", 1);
    }
    let version = public_version(&receipt["client"]["version"]);
    if version.is_none() && !receipt["client"]["version"].is_null() {
        omitted.add("non-public version text", 1);
    }
    let grade = if complete && evidence_intact {
        "observed"
    } else {
        "unknown"
    };
    let mut coverage: BTreeMap<(String, String), BTreeMap<String, usize>> = BTreeMap::new();
    let artifacts = ["artifacts", "other_scopes"].iter().flat_map(|key| {
        receipt["catalog"][key]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
    });
    for artifact in artifacts {
        omitted.add("artifact names", 1);
        omitted.add("native ids", usize::from(artifact["native_id"].is_string()));
        let (Some(category), Some(scope)) = (
            vocabulary(&artifact["category"], CATEGORIES),
            vocabulary(&artifact["scope"], SCOPES),
        ) else {
            omitted.add("unrecognized values", 1);
            continue;
        };
        let winner = vocabulary(&artifact["winner"], WINNERS).unwrap_or_else(|| "other".into());
        *coverage
            .entry((category, scope))
            .or_default()
            .entry(winner)
            .or_default() += 1;
    }
    let coverage: Vec<Value> = coverage
        .into_iter()
        .map(|((category, scope), winners)| {
            json!({"category": category, "scope": scope, "evidence": grade,
                "observed": winners.values().sum::<usize>(),
                "from_package": winners.get("package").copied().unwrap_or(0),
                "other": winners.get("other").copied().unwrap_or(0)})
        })
        .collect();
    let mut hooks = Vec::new();
    for hook in receipt["catalog"]["hooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        omitted.add("hook names", usize::from(hook["name"].is_string()));
        let event = vocabulary(&hook["event"], HOOK_EVENTS);
        let outcome = vocabulary(&hook["outcome"], HOOK_OUTCOMES);
        if event.is_none() || outcome.is_none() {
            omitted.add("unrecognized values", 1);
        }
        let exit_code = hook["exit_code"].as_i64();
        if exit_code.is_some_and(|c| c != 0) || outcome.as_deref().is_some_and(|o| o != "success") {
            codes.push("HOOK_FAILED");
        }
        hooks.push(json!({"event": event, "outcome": outcome, "exit_code": exit_code}));
    }
    codes.dedup();
    let capsule = json!({
        "capsule_format": CAPSULE_FORMAT,
        "receipt_format": receipt["format"].as_u64(),
        "agent": vocabulary(&receipt["agent"], AGENTS),
        "client_version": version,
        "status": status,
        "scope": vocabulary(&receipt["scope"], SCOPES),
        "termination": {
            "how": vocabulary(&receipt["termination"]["how"], TERMINATIONS),
            "exit_code": receipt["termination"]["exit_code"].as_i64(),
            "truncated": receipt["termination"]["truncated"].as_bool(),
        },
        "diagnostic_codes": codes,
        "evidence_grade": grade,
        "coverage": coverage,
        "hooks": hooks,
        "samples": samples,
    });
    (capsule, omitted)
}

pub fn run(ctx: &Context, args: &SupportArgs) -> Result<ExitCode> {
    let SupportAction::Export(args) = &args.action;
    let refuse = || {
        anyhow::anyhow!(
            "{} exists: support export never replaces a file\n  fix  pass another --output, or remove that file first",
            args.output.display()
        )
    };
    if fs_err::symlink_metadata(&args.output).is_ok() {
        return Err(refuse());
    }
    let path = diff::resolve(ctx, &args.receipt, None)?;
    let value = diff::read_value(&path)?;
    let evidence_intact = agentpack_lockfile::read_regular_file(&receipt::evidence_path(&path))
        .is_ok_and(|bytes| Value::String(receipt::digest(&bytes)) == value["evidence_digest"]);
    let (capsule, omitted) = capsule(&value, evidence_intact);
    let mut preview = format!(
        "support export: {} left out of the capsule:\n",
        value["id"].as_str().unwrap_or("the receipt")
    );
    for (kind, n) in &omitted.0 {
        preview.push_str(&format!("  {n} {kind}\n"));
    }
    preview.push_str("  review the file before sharing it; nothing is uploaded\n");
    // Before writing: on stdout, or on stderr under `--json` (stdout is the JSON body).
    if ctx.json {
        output::info(preview.trim_end());
    } else {
        output::stdout(&preview)?;
    }
    let mut bytes = serde_json::to_vec_pretty(&capsule)?;
    bytes.push(b'\n');
    // 0600 and flushed, as the temp file it is made from always was; never replaces a file.
    let options = agentpack_fs::WriteOptions::private_file()
        .durability(agentpack_fs::Durability::File)
        .temp(agentpack_fs::TempName::Prefix(".support-capsule-"));
    match agentpack_fs::write_new_file(&args.output, &bytes, &options) {
        Ok(()) => {}
        Err(err) if err.source.kind() == std::io::ErrorKind::AlreadyExists => return Err(refuse()),
        Err(err) => return Err(err.into()),
    }
    if ctx.json {
        output::json(&json!({"output": args.output, "omitted": omitted, "capsule": capsule}))?;
    } else {
        output::stdout(&format!("  wrote {}\n", args.output.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capsule_keeps_codes_and_counts_never_names_paths_or_digests() {
        let receipt = json!({"format": 1, "id": "1-claude", "agent": "claude",
            "status": "complete", "scope": "workspace_session", "reason": "secret-msg",
            "client": {"path": "/home/u/secret/claude", "sha256": "sha256:ab", "version": "2.1.328"},
            "identities": {"source": "sha256:cd", "mode": "secret-mode"},
            "termination": {"how": "stopped", "exit_code": null, "truncated": false},
            "evidence_digest": "sha256:ef",
            "sampling": {"samples": 60, "reason": "the skill `secret-skill` has 2 candidates"},
            "catalog": {"artifacts": [
                {"category": "skill", "scope": "workspace_session", "name": "secret-skill",
                 "native_id": "agentpack-bundle:secret-skill", "winner": "package"},
                {"category": "secret-cat", "scope": "workspace_session", "name": "x",
                 "native_id": "x", "winner": "other"}],
             "hooks": [{"event": "SessionStart", "name": "secret-hook", "exit_code": 7, "outcome": "secret-out"}]}});
        let (capsule, omitted) = capsule(&receipt, true);
        let text = capsule.to_string();
        assert!(!text.contains("secret"), "{text}");
        assert!(!text.contains("sha256"), "{text}");
        assert_eq!(capsule["client_version"], "2.1.328");
        assert_eq!(capsule["coverage"][0]["from_package"], 1);
        let codes = capsule["diagnostic_codes"].to_string();
        assert!(
            codes.contains("PROBE_COMPLETE") && codes.contains("HOOK_FAILED"),
            "{codes}"
        );
        assert_eq!(omitted.0["artifact names"], 2);
        assert_eq!(omitted.0["paths"], 1);
        assert_eq!(omitted.0["unrecognized values"], 2);
        assert_eq!(
            (capsule["samples"].clone(), omitted.0["sampling reasons"]),
            (json!(60), 1)
        );
        let (capsule, _) = capsule_of_version("2.1.328 (secret build)");
        assert!(capsule["client_version"].is_null());
    }

    fn capsule_of_version(version: &str) -> (Value, Omitted) {
        capsule(
            &json!({"status": "failed", "client": {"version": version}}),
            false,
        )
    }
}
