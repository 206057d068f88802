//! Inherited configuration: what an agent also loads besides agentpack's staged files, per agent,
//! since each reads different places, and which packaged artifacts each one shadows (or is
//! shadowed by) when names clash. Reads directory listings and file existence only.

use std::path::Path;

use super::plan::AgentPlan;

pub use agentpack_builders::contract::places::{places_for, Holds, InheritedPlace};

/// One inherited place that exists, and the packaged artifacts whose names it also holds.
#[derive(Debug, Clone)]
pub struct Inherited {
    pub place: InheritedPlace,
    /// (category, name) of packaged artifacts this place holds a same-named copy of.
    pub shadows: Vec<(&'static str, String)>,
}

/// The places of `agent` that exist, each with the packaged artifacts it clashes with.
pub fn scan(places: Vec<InheritedPlace>, plan: &AgentPlan) -> Vec<Inherited> {
    let mut found = Vec::new();
    for place in places {
        if std::fs::symlink_metadata(&place.path).is_err() {
            continue;
        }
        let mut shadows = Vec::new();
        if let Some(holds) = place.holds {
            for name in entry_names(&place.path, holds) {
                if plan
                    .artifacts
                    .contains_key(&(holds.category(), name.clone()))
                {
                    shadows.push((holds.category(), name));
                }
            }
        }
        // A directory entry like `.claude/` is reported once, by its most specific place.
        if place.holds.is_none() && place.shown.ends_with('/') && !has_other_files(&place.path) {
            continue;
        }
        found.push(Inherited { place, shadows });
    }
    found
}

/// The artifact names in `dir`.
fn entry_names(dir: &Path, holds: Holds) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            match holds {
                Holds::Skills => (!name.starts_with('.')).then_some(name),
                Holds::Commands | Holds::Agents => name.strip_suffix(".md").map(str::to_owned),
            }
        })
        .collect();
    names.sort();
    names
}

/// Whether a configuration directory holds anything besides the artifact directories reported on
/// their own.
fn has_other_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        !matches!(name.to_str(), Some("skills" | "commands" | "agents"))
    })
}

/// The planned winner of a packaged artifact's name: `workspace` or `user` when such a place holds
/// a same-named copy (the scan's view; a probe observes the agent's own), else `package`.
pub fn planned_winner(inherited: &[Inherited], category: &str, name: &str) -> &'static str {
    let holds = |scope: &str| {
        inherited.iter().any(|found| {
            found.place.scope == scope
                && found
                    .shadows
                    .iter()
                    .any(|(c, n)| *c == category && n == name)
        })
    };
    if holds("workspace") {
        "workspace"
    } else if holds("user") {
        "user"
    } else {
        "package"
    }
}
