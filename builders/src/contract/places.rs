//! The places each agent reads that agentpack does not manage (user skill roots, workspace
//! instruction files...), from the agent table. Pure path arithmetic: it reads nothing.

use std::path::{Path, PathBuf};

use agentpack_harness::agent::PlaceBase;
use agentpack_harness::Agent;

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

pub use agentpack_harness::agent::Holds;

/// The places `agent` reads that agentpack does not manage. `home` is `$HOME`, `config_home`
/// `$XDG_CONFIG_HOME` (else `~/.config`).
pub fn places_for(
    agent: Agent,
    workspace: &Path,
    home: Option<&Path>,
    config_home: Option<&Path>,
) -> Vec<InheritedPlace> {
    let config = config_home
        .map(Path::to_path_buf)
        .or_else(|| home.map(|home| home.join(".config")));
    agent
        .profile()
        .native_places
        .iter()
        .filter_map(|place| {
            let relative = place.path;
            let (scope, shown, path) = match place.base {
                PlaceBase::Home => ("user", format!("~/{relative}"), home?.join(relative)),
                PlaceBase::ConfigHome => (
                    "user",
                    format!("$XDG_CONFIG_HOME/{relative}"),
                    config.as_ref()?.join(relative),
                ),
                PlaceBase::Workspace => (
                    "workspace",
                    relative.to_owned(),
                    workspace.join(relative.trim_end_matches('/')),
                ),
            };
            Some(InheritedPlace {
                scope,
                shown,
                path,
                holds: place.holds,
            })
        })
        .collect()
}
