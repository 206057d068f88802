//! `agentpack probe diff A B`: compares two probe receipts (an id, a receipt file or `latest`)
//! and reports deltas per identity, per observed artifact (category, scope, name) and per hook.
//! JSON values are compared as they are: `"1"` and `1` differ, nothing is coerced. Receipts of
//! different client versions, agents or adapters, or a receipt that is not `complete`, are marked
//! incompatible: their catalogs do not say the same kind of thing.
//!
//! It also owns the clap shape of `agentpack probe` with its subcommands, so that
//! `agentpack probe --agent X` keeps its flags. It never writes, never runs a client.
//!
//! Exit codes: 0 compatible and equal, 3 compatible with deltas, 4 incompatible.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;

use super::ProbeArgs;
use crate::context::Context;
use crate::evidence::receipt;
use crate::output;
use crate::project::Project;

/// `agentpack probe`: a probe (`--agent`) or one of its subcommands.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProbeCommand {
    #[command(subcommand)]
    pub action: Option<ProbeAction>,
    #[command(flatten)]
    pub probe: Option<ProbeArgs>,
}

#[derive(Debug, Subcommand)]
pub enum ProbeAction {
    /// Compare two receipts (id, receipt file or `latest`): exit 0 equal, 3 deltas, 4 incompatible.
    Diff(DiffArgs),
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first receipt: an id, a receipt file, or `latest` (of the other receipt's agent).
    pub a: String,
    /// The second receipt: an id, a receipt file, or `latest` (of the other receipt's agent).
    pub b: String,
}

/// Runs `agentpack probe ...`.
pub fn dispatch(ctx: &Context, command: &ProbeCommand) -> Result<ExitCode> {
    match (&command.action, &command.probe) {
        (Some(ProbeAction::Diff(args)), _) => run(ctx, args),
        (None, Some(probe)) => super::run(ctx, probe),
        (None, None) => anyhow::bail!(
            "`agentpack probe` needs an agent or a subcommand\n  fix  run `agentpack probe --agent claude|codex|opencode` or `agentpack probe diff A B`"
        ),
    }
}

/// One identity that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdentityDelta {
    pub identity: String,
    pub a: Value,
    pub b: Value,
}

/// One property of an artifact or hook that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PropertyDelta {
    pub property: String,
    pub a: Value,
    pub b: Value,
}

/// One observed artifact that differs between the receipts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArtifactDelta {
    /// `only_in_a`, `only_in_b` or `changed`.
    pub change: String,
    pub category: String,
    pub scope: String,
    pub name: String,
    pub properties: Vec<PropertyDelta>,
}

/// One hook outcome that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookDelta {
    pub change: String,
    pub event: String,
    pub name: String,
    pub properties: Vec<PropertyDelta>,
}

/// The comparison of two receipts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptDiff {
    pub compatible: bool,
    /// Why the receipts are incompatible (empty when compatible).
    pub incompatible: Vec<String>,
    pub identities: Vec<IdentityDelta>,
    pub artifacts: Vec<ArtifactDelta>,
    pub hooks: Vec<HookDelta>,
}

impl ReceiptDiff {
    pub fn has_deltas(&self) -> bool {
        !(self.identities.is_empty() && self.artifacts.is_empty() && self.hooks.is_empty())
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Deltas of every key of two objects but `skip` (strict JSON equality).
fn property_deltas(a: &Value, b: &Value, skip: &[&str]) -> Vec<PropertyDelta> {
    let empty = serde_json::Map::new();
    let a = a.as_object().unwrap_or(&empty);
    let b = b.as_object().unwrap_or(&empty);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| !skip.contains(&k.as_str()))
        .filter_map(|k| {
            let (va, vb) = (
                a.get(k).cloned().unwrap_or(Value::Null),
                b.get(k).cloned().unwrap_or(Value::Null),
            );
            (va != vb).then(|| PropertyDelta {
                property: k.clone(),
                a: va,
                b: vb,
            })
        })
        .collect()
}

/// Groups the entries of `list` by `key` (an entry that repeats a key gets `#2`, `#3`...).
fn keyed(list: &Value, key: &dyn Fn(&Value) -> Vec<String>) -> BTreeMap<Vec<String>, Value> {
    let mut out = BTreeMap::new();
    for entry in list.as_array().map(Vec::as_slice).unwrap_or_default() {
        let base = key(entry);
        let mut k = base.clone();
        let mut n = 1;
        while out.contains_key(&k) {
            n += 1;
            k = base.clone();
            k.push(format!("#{n}"));
        }
        out.insert(k, entry.clone());
    }
    out
}

/// `(change, key, properties)` for every entry of the lists `a` and `b` that differs, the entries
/// keyed by the text of their `key_fields` (which are not compared as properties); the key as the
/// values of `key_fields`, in their order.
fn list_deltas<const N: usize>(
    a: &Value,
    b: &Value,
    key_fields: [&str; N],
) -> Vec<(String, [String; N], Vec<PropertyDelta>)> {
    let key = |v: &Value| key_fields.iter().map(|field| text(&v[*field])).collect();
    let (a, b) = (keyed(a, &key), keyed(b, &key));
    let keys: std::collections::BTreeSet<&Vec<String>> = a.keys().chain(b.keys()).collect();
    let skip = &key_fields;
    keys.into_iter()
        .filter_map(|k| {
            let (change, properties) = match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => ("changed", property_deltas(x, y, skip)),
                (Some(x), None) => ("only_in_a", property_deltas(x, &Value::Null, skip)),
                (None, Some(y)) => ("only_in_b", property_deltas(&Value::Null, y, skip)),
                (None, None) => return None,
            };
            if change == "changed" && properties.is_empty() {
                return None;
            }
            // The key without the `#2` a repeated entry got.
            let mut values = k.iter().cloned();
            let key = std::array::from_fn(|_| values.next().unwrap_or_default());
            Some((change.to_owned(), key, properties))
        })
        .collect()
}

/// Compares two receipts (as their JSON values): pure.
pub fn diff(a: &Value, b: &Value) -> ReceiptDiff {
    let mut incompatible = Vec::new();
    if a["agent"] != b["agent"] {
        incompatible.push(format!(
            "the receipts are of different agents ({} and {})",
            text(&a["agent"]),
            text(&b["agent"])
        ));
    }
    let (va, vb) = (&a["client"]["version"], &b["client"]["version"]);
    if va != vb {
        let version = |v: &Value| {
            if v.is_null() {
                "none".to_owned()
            } else {
                text(v)
            }
        };
        let (va, vb) = (version(va), version(vb));
        incompatible.push(format!("the client versions differ ({va} and {vb})"));
    }
    if a["adapter"] != b["adapter"] {
        incompatible.push(format!(
            "the adapters differ ({} and {})",
            text(&a["adapter"]),
            text(&b["adapter"])
        ));
    }
    for (side, r) in [("A", a), ("B", b)] {
        if r["status"] != "complete" {
            incompatible.push(format!(
                "receipt {side} is `{}`, not complete: its catalog is unknown",
                text(&r["status"])
            ));
        }
    }
    let mut identities = property_deltas(&a["identities"], &b["identities"], &[])
        .into_iter()
        .map(|d| IdentityDelta {
            identity: d.property,
            a: d.a,
            b: d.b,
        })
        .collect::<Vec<_>>();
    for field in ["scope", "agent"] {
        if a[field] != b[field] {
            identities.push(IdentityDelta {
                identity: field.to_owned(),
                a: a[field].clone(),
                b: b[field].clone(),
            });
        }
    }
    if a["client"]["sha256"] != b["client"]["sha256"] {
        identities.push(IdentityDelta {
            identity: "client.sha256".to_owned(),
            a: a["client"]["sha256"].clone(),
            b: b["client"]["sha256"].clone(),
        });
    }
    // Both scopes a receipt observes (its own and `other_scopes`): the key holds the scope.
    let observed = |r: &Value| {
        Value::Array(
            ["artifacts", "other_scopes"]
                .iter()
                .flat_map(|key| r["catalog"][key].as_array().cloned().unwrap_or_default())
                .collect(),
        )
    };
    let artifacts = list_deltas(&observed(a), &observed(b), ["category", "scope", "name"])
        .into_iter()
        .map(
            |(change, [category, scope, name], properties)| ArtifactDelta {
                change,
                category,
                scope,
                name,
                properties,
            },
        )
        .collect();
    let hooks = list_deltas(
        &a["catalog"]["hooks"],
        &b["catalog"]["hooks"],
        ["event", "name"],
    )
    .into_iter()
    .map(|(change, [event, name], properties)| HookDelta {
        change,
        event,
        name,
        properties,
    })
    .collect();
    ReceiptDiff {
        compatible: incompatible.is_empty(),
        incompatible,
        identities,
        artifacts,
        hooks,
    }
}

/// The receipt directory of the current project.
pub(crate) fn receipt_dir(ctx: &Context) -> Result<PathBuf> {
    Ok(Project::discover(ctx)?.state_dir().join(receipt::DIR))
}

/// Whether `reference` is a file the caller can read directly (no project needed).
fn direct_file(reference: &str, cwd: &Path) -> Option<PathBuf> {
    let path = cwd.join(reference);
    (reference != "latest" && (reference.contains('/') || reference.ends_with(".json")))
        .then_some(path)
        .filter(|p| p.is_file())
}

/// Resolves `reference` (id, path, or `latest` of `agent`, or of any agent when `None`).
pub(crate) fn resolve(ctx: &Context, reference: &str, agent: Option<&str>) -> Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    if let Some(path) = direct_file(reference, &cwd) {
        return Ok(path);
    }
    let dir = receipt_dir(ctx)?;
    if reference == "latest" && agent.is_none() {
        return latest_of_any(&dir);
    }
    Ok(receipt::locate(&dir, reference, agent.unwrap_or_default(), &cwd)?.path)
}

/// The newest `complete` current-format receipt of any agent in `dir`.
fn latest_of_any(dir: &Path) -> Result<PathBuf> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    for name in names.into_iter().rev() {
        let path = dir.join(name);
        if receipt::read(&path).is_ok_and(|r| r.status == "complete") {
            return Ok(path);
        }
    }
    anyhow::bail!(
        "there is no successful probe receipt in {}\n  fix  run `agentpack probe --agent claude|codex|opencode`",
        dir.display()
    )
}

/// Reads a receipt (checked as a current-format receipt) as its JSON value.
pub(crate) fn read_value(path: &Path) -> Result<Value> {
    receipt::read(path)?;
    let bytes = agentpack_lockfile::read_regular_file(path)
        .with_context(|| format!("cannot read the receipt {}", path.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}

fn run(ctx: &Context, args: &DiffArgs) -> Result<ExitCode> {
    if args.a == "latest" && args.b == "latest" {
        anyhow::bail!(
            "`probe diff latest latest` compares a receipt with itself\n  fix  name one side by its id or file"
        );
    }
    let (a, b) = if args.a == "latest" {
        let b = read_value(&resolve(ctx, &args.b, None)?)?;
        let agent = text(&b["agent"]);
        (read_value(&resolve(ctx, &args.a, Some(&agent))?)?, b)
    } else {
        let a = read_value(&resolve(ctx, &args.a, None)?)?;
        let agent = text(&a["agent"]);
        let b = read_value(&resolve(ctx, &args.b, Some(&agent))?)?;
        (a, b)
    };
    let result = diff(&a, &b);
    if ctx.json {
        output::json(&serde_json::json!({
            "a": a["id"], "b": b["id"], "diff": result,
        }))?;
    } else {
        output::stdout(&human(&a, &b, &result))?;
    }
    Ok(ExitCode::from(if !result.compatible {
        4
    } else if result.has_deltas() {
        3
    } else {
        0
    }))
}

fn human(a: &Value, b: &Value, diff: &ReceiptDiff) -> String {
    let mut out = format!("probe diff {} {}\n", text(&a["id"]), text(&b["id"]));
    for why in &diff.incompatible {
        out.push_str(&format!("  incompatible: {why}\n"));
    }
    for d in &diff.identities {
        out.push_str(&format!("  identity {}: {} -> {}\n", d.identity, d.a, d.b));
    }
    let props = |p: &[PropertyDelta]| {
        p.iter()
            .map(|d| format!("{} {} -> {}", d.property, d.a, d.b))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for d in &diff.artifacts {
        let (change, category, name, scope) = (&d.change, &d.category, &d.name, &d.scope);
        let properties = props(&d.properties);
        out.push_str(&format!(
            "  {change} {category}:{name} ({scope}): {properties}\n"
        ));
    }
    for d in &diff.hooks {
        let (change, event, name) = (&d.change, &d.event, &d.name);
        let properties = props(&d.properties);
        out.push_str(&format!("  hook {change} {event} {name}: {properties}\n"));
    }
    if diff.compatible && !diff.has_deltas() {
        out.push_str("  no differences\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn receipt(version: &str, artifacts: Value) -> Value {
        json!({"agent": "claude", "status": "complete", "adapter": "claude-init/1",
            "scope": "workspace_session",
            "client": {"version": version, "sha256": "sha256:x", "path": "/bin/claude"},
            "identities": {"source": "s1", "mode": "default"},
            "catalog": {"artifacts": artifacts,
                "hooks": [{"event": "SessionStart", "name": "h", "exit_code": 7, "outcome": "failed"}]}})
    }

    fn skill(name: &str, winner: Value) -> Value {
        json!({"category": "skill", "scope": "workspace_session", "name": name,
            "native_id": format!("b:{name}"), "winner": winner})
    }

    #[test]
    fn equal_receipts_have_no_deltas() {
        let a = receipt("2.1.328", json!([skill("x", json!("package"))]));
        let d = diff(&a, &a.clone());
        assert!(d.compatible && !d.has_deltas(), "{d:?}");
    }

    #[test]
    fn a_removed_skill_is_named_and_identities_are_separate_deltas() {
        let a = receipt(
            "2.1.328",
            json!([skill("x", json!("package")), skill("y", json!("package"))]),
        );
        let mut b = receipt("2.1.328", json!([skill("y", json!("package"))]));
        b["identities"]["source"] = json!("s2");
        b["catalog"]["hooks"][0]["exit_code"] = json!(0);
        let d = diff(&a, &b);
        assert!(d.compatible);
        assert_eq!(d.artifacts.len(), 1);
        assert_eq!(
            (d.artifacts[0].change.as_str(), d.artifacts[0].name.as_str()),
            ("only_in_a", "x")
        );
        assert_eq!(d.identities.len(), 1);
        assert_eq!(d.identities[0].identity, "source");
        assert_eq!(d.hooks[0].properties[0].property, "exit_code");
    }

    #[test]
    fn values_are_compared_without_coercion() {
        let a = receipt("2.1.328", json!([skill("x", json!("1"))]));
        let b = receipt("2.1.328", json!([skill("x", json!(1))]));
        let d = diff(&a, &b);
        assert_eq!(d.artifacts.len(), 1, "{d:?}");
        assert_eq!(d.artifacts[0].change, "changed");
        assert_eq!(d.artifacts[0].properties[0].a, json!("1"));
        assert_eq!(d.artifacts[0].properties[0].b, json!(1));
        let t = diff(
            &receipt("2.1.328", json!([skill("x", json!("true"))])),
            &receipt("2.1.328", json!([skill("x", json!(true))])),
        );
        assert!(t.has_deltas());
    }

    #[test]
    fn other_versions_and_failed_receipts_are_incompatible() {
        let a = receipt("2.1.328", json!([]));
        let d = diff(&a, &receipt("2.1.329", json!([])));
        assert!(!d.compatible);
        assert!(d.incompatible[0].contains("client versions"), "{d:?}");
        let mut failed = a.clone();
        failed["status"] = json!("failed");
        let d = diff(&a, &failed);
        assert!(
            !d.compatible && d.incompatible[0].contains("receipt B"),
            "{d:?}"
        );
    }
}
