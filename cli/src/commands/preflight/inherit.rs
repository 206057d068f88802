//! Inherited configuration: what an agent also loads besides agentpack's staged files, per agent,
//! since each reads different places, and which packaged artifacts each one shadows (or is
//! shadowed by) when names clash. Reads directory listings and file existence only.

use std::path::{Path, PathBuf};

use agentpack_harness::Agent;

use super::plan::AgentPlan;

/// One place an agent reads that agentpack does not stage.
#[derive(Debug, Clone)]
pub struct InheritedPlace {
    /// `user` or `workspace`.
    pub scope: &'static str,
    /// As shown: `~/.claude/skills`, `.cursor/`.
    pub shown: String,
    pub path: PathBuf,
    /// What the entries of this directory are, when they are named artifacts.
    pub holds: Option<Holds>,
}

/// How a directory's entries name artifacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// `<name>/SKILL.md` directories.
    Skills,
    /// `<name>.md` files.
    Commands,
    /// `<name>.md` files.
    Agents,
}

impl Holds {
    pub fn category(self) -> &'static str {
        match self {
            Holds::Skills => "skill",
            Holds::Commands => "command",
            Holds::Agents => "agent",
        }
    }
}

/// The places `agent` reads that agentpack does not manage. `home` is `$HOME`, `config_home`
/// `$XDG_CONFIG_HOME` (else `~/.config`).
pub fn places_for(
    agent: Agent,
    workspace: &Path,
    home: Option<&Path>,
    config_home: Option<&Path>,
) -> Vec<InheritedPlace> {
    let mut places = Vec::new();
    let mut user = |relative: &str, holds| {
        if let Some(home) = home {
            places.push(InheritedPlace {
                scope: "user",
                shown: format!("~/{relative}"),
                path: home.join(relative),
                holds,
            });
        }
    };
    match agent {
        Agent::Claude => {
            user(".claude/skills", Some(Holds::Skills));
            user(".claude/commands", Some(Holds::Commands));
            user(".claude/agents", Some(Holds::Agents));
            user(".claude/settings.json", None);
            user(".claude/CLAUDE.md", None);
        }
        Agent::Codex => {
            user(".codex/config.toml", None);
            user(".codex/skills", Some(Holds::Skills));
            user(".agents/skills", Some(Holds::Skills));
        }
        Agent::Cursor => {
            user(".cursor/skills", Some(Holds::Skills));
            user(".cursor/rules", None);
        }
        Agent::OpenCode => {
            // OpenCode also reads Claude-compatible skill directories.
            user(".claude/skills", Some(Holds::Skills));
        }
        Agent::Grok => {
            user(".grok/user-settings.json", None);
        }
        Agent::Antigravity => {
            user(".gemini/GEMINI.md", None);
        }
    }
    if agent == Agent::OpenCode {
        let config = config_home
            .map(Path::to_path_buf)
            .or_else(|| home.map(|home| home.join(".config")));
        if let Some(config) = config {
            places.push(InheritedPlace {
                scope: "user",
                shown: "$XDG_CONFIG_HOME/opencode".to_owned(),
                path: config.join("opencode"),
                holds: None,
            });
            places.push(InheritedPlace {
                scope: "user",
                shown: "$XDG_CONFIG_HOME/opencode/skills".to_owned(),
                path: config.join("opencode/skills"),
                holds: Some(Holds::Skills),
            });
        }
    }
    let mut ws = |relative: &str, holds| {
        places.push(InheritedPlace {
            scope: "workspace",
            shown: relative.to_owned(),
            path: workspace.join(relative.trim_end_matches('/')),
            holds,
        });
    };
    match agent {
        Agent::Claude => {
            ws(".claude/", None);
            ws(".claude/skills", Some(Holds::Skills));
            ws(".claude/commands", Some(Holds::Commands));
            ws(".claude/agents", Some(Holds::Agents));
            ws("CLAUDE.md", None);
        }
        Agent::Cursor => {
            ws(".cursor/", None);
            ws(".cursor/skills", Some(Holds::Skills));
            ws(".cursor/commands", Some(Holds::Commands));
            ws("AGENTS.md", None);
        }
        Agent::Codex => {
            ws(".codex/skills", Some(Holds::Skills));
            ws("AGENTS.md", None);
        }
        Agent::OpenCode => {
            ws(".opencode/skills", Some(Holds::Skills));
            ws(".claude/skills", Some(Holds::Skills));
            ws("AGENTS.md", None);
            ws("CLAUDE.md", None);
        }
        Agent::Grok => {
            ws("AGENTS.md", None);
        }
        Agent::Antigravity => {
            ws("AGENTS.md", None);
        }
    }
    places
}

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
