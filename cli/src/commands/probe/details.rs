//! Claude Code's `plugin details NAME` (the loader's component inventory of the staged bundle,
//! loaded with `--plugin-dir`): a parser tied to the text Claude Code 2.1.328 prints (it has no
//! `--json`), and the cross-check with `plugin validate`. Pure: bytes in, an inventory or a
//! reason out; output that is not the validated layout is malformed, never an empty inventory.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::parse::{Observed, ParseFailure};
use super::process::Captured;
use crate::evidence::catalog::Property;

/// The plugin name of the staged Claude bundle.
pub const BUNDLE: &str = "agentpack-bundle";

/// The component inventory `plugin details` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInventory {
    /// The `Skills` line: Claude Code lists skills and commands together, sorted.
    pub skills_and_commands: Vec<String>,
    pub agents: Vec<String>,
    /// Hook event names.
    pub hooks: Vec<String>,
    pub mcp_servers: Vec<String>,
    pub lsp_servers: Vec<String>,
}

/// The inventory lines, in the order 2.1.328 prints them, with the note it appends to a
/// non-empty list.
const LINES: [(&str, &str); 5] = [
    ("Skills", ""),
    ("Agents", ""),
    ("Hooks", "  (harness-only \u{2014} no model context cost)"),
    (
        "MCP servers",
        "  (tool schemas resolved at runtime; not counted)",
    ),
    ("LSP servers", "  (no model context cost)"),
];

/// Parses `claude plugin details <plugin>` for the plugin `plugin`.
pub fn plugin_details(stdout: &[u8], plugin: &str) -> Result<PluginInventory, ParseFailure> {
    let malformed = |why: String| ParseFailure::Malformed(format!("`plugin details`: {why}"));
    let text = std::str::from_utf8(stdout).map_err(|_| malformed("not UTF-8".to_owned()))?;
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    if first.split_whitespace().next() != Some(plugin) {
        return Err(malformed(format!(
            "the first line does not name `{plugin}`"
        )));
    }
    if !lines.any(|line| line == "Component inventory") {
        return Err(malformed("no `Component inventory` section".to_owned()));
    }
    let mut lists: Vec<Vec<String>> = Vec::new();
    for (label, note) in LINES {
        let line = lines
            .next()
            .ok_or_else(|| malformed(format!("the inventory ends before `{label}`")))?;
        let rest = line
            .strip_prefix("  ")
            .and_then(|l| l.strip_prefix(label))
            .and_then(|l| l.strip_prefix(" ("))
            .ok_or_else(|| malformed(format!("expected the `{label}` line")))?;
        let (count, items) = rest
            .split_once(')')
            .ok_or_else(|| malformed(format!("the `{label}` line has no count")))?;
        let count: usize = count
            .parse()
            .map_err(|_| malformed(format!("the `{label}` count is not a number")))?;
        let names: Vec<String> = if count == 0 {
            if !items.is_empty() {
                return Err(malformed(format!("`{label} (0)` lists something")));
            }
            Vec::new()
        } else {
            let items = items
                .strip_prefix("  ")
                .and_then(|l| l.strip_suffix(note))
                .ok_or_else(|| {
                    malformed(format!("the `{label}` list is not the validated layout"))
                })?;
            items.split(", ").map(str::to_owned).collect()
        };
        if names.len() != count || names.iter().any(String::is_empty) {
            return Err(malformed(format!(
                "`{label} ({count})` lists {} name(s)",
                names.len()
            )));
        }
        lists.push(names);
    }
    let mut lists = lists.into_iter();
    let mut next = || lists.next().unwrap_or_default();
    Ok(PluginInventory {
        skills_and_commands: next(),
        agents: next(),
        hooks: next(),
        mcp_servers: next(),
        lsp_servers: next(),
    })
}

/// Whether `plugin details` failed because the client has no such command (an older client):
/// then the property is recorded as unknown, never guessed.
pub fn is_unknown_command(stdout: &[u8], stderr: &[u8]) -> bool {
    [stdout, stderr].iter().any(|bytes| {
        String::from_utf8_lossy(bytes)
            .to_lowercase()
            .contains("unknown command")
    })
}

/// What the `plugin details` run `run` observed, given what `plugin validate` provides
/// (`validated`): the controlled-projection artifacts (those both list) and the `plugin_details`
/// property. When the validator listed nothing because it does not follow the bundle's links
/// (`validated` is `None`), the artifacts are the loader's inventory alone, each a command when
/// `staged_commands` names it (the bundle's `commands/<name>.md`) and a skill otherwise, and the
/// property says so. A client without the command gives the property `unknown` (and keeps
/// `validated`); any other failure or layout is malformed.
pub fn observe(
    validated: Option<Vec<Observed>>,
    staged_commands: &BTreeSet<String>,
    run: &Captured,
) -> Result<(Vec<Observed>, Property), ParseFailure> {
    let property = |status: &str, value, reason| Property {
        name: "plugin_details".to_owned(),
        scope: "controlled_projection".to_owned(),
        status: status.to_owned(),
        value,
        reason,
    };
    if run.termination.exit_code != Some(0) {
        if is_unknown_command(&run.stdout, &run.stderr) {
            return Ok((
                validated.unwrap_or_default(),
                property(
                    "unknown",
                    None,
                    Some("this Claude Code has no `plugin details`: the loader's inventory is unknown".to_owned()),
                ),
            ));
        }
        let first = String::from_utf8_lossy(&run.stderr)
            .lines()
            .chain(String::from_utf8_lossy(&run.stdout).lines())
            .find(|l| !l.trim().is_empty())
            .map(|l| l.chars().take(120).collect::<String>())
            .unwrap_or_default();
        return Err(ParseFailure::Malformed(format!(
            "`claude plugin details {BUNDLE}` exited with {:?}: {first}",
            run.termination.exit_code
        )));
    }
    let inventory = plugin_details(&run.stdout, BUNDLE)?;
    let Some(validated) = validated else {
        let value = serde_json::json!({"inventory": inventory, "validate_only": []});
        return Ok((
            loaded_components(&inventory, staged_commands),
            property(
                "observed",
                Some(value),
                Some("`plugin validate` listed no components: it does not follow the bundle's links (unchanged skill directories), which the loader follows; the projection is the loader's inventory".to_owned()),
            ),
        ));
    };
    let (both, validate_only) = cross_check(validated, &inventory);
    let reason = (!validate_only.is_empty()).then(|| {
        format!(
            "`plugin validate` provides what the loader does not list: {}",
            validate_only.join(", ")
        )
    });
    let value = serde_json::json!({"inventory": inventory, "validate_only": validate_only});
    Ok((both, property("observed", Some(value), reason)))
}

/// The loader's inventory as controlled-projection artifacts of the bundle: agents, and the
/// skills-and-commands list split by what the bundle stages as a command.
fn loaded_components(
    inventory: &PluginInventory,
    staged_commands: &BTreeSet<String>,
) -> Vec<Observed> {
    let agents = inventory.agents.iter().map(|name| ("agent", name));
    let others = inventory.skills_and_commands.iter().map(|name| {
        let category = if staged_commands.contains(name) {
            "command"
        } else {
            "skill"
        };
        (category, name)
    });
    others
        .chain(agents)
        .map(|(category, name)| Observed {
            category: category.to_owned(),
            name: name.clone(),
            native_id: format!("{BUNDLE}:{name}"),
            winner: "package".to_owned(),
            scope: "controlled_projection".to_owned(),
        })
        .collect()
}

/// The artifacts `plugin validate` provides that the loader's inventory lists too (the
/// controlled-projection observations), and those it does not (`category:name`).
pub fn cross_check(
    validated: Vec<Observed>,
    inventory: &PluginInventory,
) -> (Vec<Observed>, Vec<String>) {
    let mut both = Vec::new();
    let mut validate_only = Vec::new();
    for artifact in validated {
        let listed = match artifact.category.as_str() {
            "agent" => &inventory.agents,
            _ => &inventory.skills_and_commands,
        };
        if listed.contains(&artifact.name) {
            both.push(artifact);
        } else {
            validate_only.push(format!("{}:{}", artifact.category, artifact.name));
        }
    }
    (both, validate_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRINTED: &str = "agentpack-bundle 0.0.0
  Description: Skills, commands, agents, hooks and MCP servers staged by agentpack
  Source: agentpack-bundle@inline

Component inventory
  Skills (3)  cmd1, sent, steady
  Agents (1)  helper
  Hooks (1)  SessionStart  (harness-only \u{2014} no model context cost)
  MCP servers (0)
  LSP servers (0)

Projected token cost
  Always-on:   ~28 tok   added to every session
";

    #[test]
    fn the_validated_layout_is_read_and_anything_else_is_malformed() {
        let inventory = plugin_details(PRINTED.as_bytes(), "agentpack-bundle").unwrap();
        assert_eq!(inventory.skills_and_commands, ["cmd1", "sent", "steady"]);
        assert_eq!(inventory.agents, ["helper"]);
        assert_eq!(inventory.hooks, ["SessionStart"]);
        assert!(inventory.mcp_servers.is_empty());
        // Truncated, another plugin, a count that does not match, another layout.
        let cut = &PRINTED[..PRINTED.find("Agents").unwrap()];
        assert!(plugin_details(cut.as_bytes(), "agentpack-bundle").is_err());
        assert!(plugin_details(PRINTED.as_bytes(), "other").is_err());
        let miscounted = PRINTED.replace("Skills (3)", "Skills (4)");
        assert!(plugin_details(miscounted.as_bytes(), "agentpack-bundle").is_err());
        let renamed = PRINTED.replace("Component inventory", "Components");
        assert!(plugin_details(renamed.as_bytes(), "agentpack-bundle").is_err());
        assert!(plugin_details(b"", "agentpack-bundle").is_err());
    }

    #[test]
    fn only_what_both_list_is_observed() {
        let inventory = plugin_details(PRINTED.as_bytes(), "agentpack-bundle").unwrap();
        let observed = |category: &str, name: &str| Observed {
            category: category.to_owned(),
            name: name.to_owned(),
            native_id: format!("agentpack-bundle:{name}"),
            winner: "package".to_owned(),
            scope: "controlled_projection".to_owned(),
        };
        let (both, only) = cross_check(
            vec![
                observed("skill", "sent"),
                observed("command", "cmd1"),
                observed("agent", "helper"),
                observed("skill", "gone"),
            ],
            &inventory,
        );
        assert_eq!(both.len(), 3);
        assert_eq!(only, ["skill:gone"]);
        assert!(is_unknown_command(b"", b"error: unknown command 'details'"));
        assert!(!is_unknown_command(b"", b"Plugin \"x\" not found."));
    }

    #[test]
    fn a_validator_that_listed_nothing_leaves_the_loaders_inventory_with_staged_categories() {
        let inventory = plugin_details(PRINTED.as_bytes(), "agentpack-bundle").unwrap();
        let commands = BTreeSet::from(["cmd1".to_owned()]);
        let observed: Vec<(String, String)> = loaded_components(&inventory, &commands)
            .into_iter()
            .map(|o| (o.category, o.native_id))
            .collect();
        let expected = [
            ("command", "agentpack-bundle:cmd1"),
            ("skill", "agentpack-bundle:sent"),
            ("skill", "agentpack-bundle:steady"),
            ("agent", "agentpack-bundle:helper"),
        ];
        assert_eq!(
            observed,
            expected.map(|(c, n)| (c.to_owned(), n.to_owned()))
        );
    }
}
