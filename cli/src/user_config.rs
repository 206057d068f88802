//! The user's own configuration file, `$XDG_CONFIG_HOME/agentpack/config.toml` (default
//! `~/.config/agentpack/config.toml`): settings of this user on this machine that never belong in
//! a project's files.
//!
//! Owns reading the file and its `substituters = ["oci://..."]` list (see
//! `docs/src/substituters.md`); with `AGENTPACK_SUBSTITUTERS` it makes the ordered substituter
//! list of every command that fetches. A missing file is an empty configuration; a file that does
//! not parse, or a key of the wrong type, stops the command with the file's path. Keys this
//! version does not know are left alone (a newer agentpack may have written them). Never writes
//! the file.

use std::path::PathBuf;

use agentpack_builders::substitute::{split_list, SubstituterEntry};
use anyhow::{bail, Context as _, Result};

use crate::env::{self, EnvVars};

/// The config file's path: `$XDG_CONFIG_HOME/agentpack/config.toml`, else
/// `$HOME/.config/agentpack/config.toml`; `None` when neither variable is set.
pub fn config_path() -> Option<PathBuf> {
    env::var(EnvVars::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .or_else(|| env::var(EnvVars::HOME).map(|home| PathBuf::from(home).join(".config")))
        .map(|dir| dir.join("agentpack").join("config.toml"))
}

/// What the config file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserConfig {
    /// `substituters`, in order.
    pub substituters: Vec<SubstituterEntry>,
}

/// Reads the config file (an empty configuration when it does not exist).
pub fn load() -> Result<UserConfig> {
    let Some(path) = config_path() else {
        return Ok(UserConfig::default());
    };
    let text = match fs_err::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(UserConfig::default())
        }
        Err(error) => {
            return Err(error).with_context(|| {
                format!(
                    "cannot read the agentpack config file {}\n  fix       make it readable, or move it away",
                    path.display()
                )
            })
        }
    };
    parse(&text, &path.display().to_string())
}

/// Parses config text; `origin` names the file in messages.
pub fn parse(text: &str, origin: &str) -> Result<UserConfig> {
    let table: toml::Table = toml::from_str(text).with_context(|| {
        format!("{origin} is not valid TOML\n  fix       correct the file, or move it away")
    })?;
    let mut config = UserConfig::default();
    match table.get("substituters") {
        None => {}
        Some(toml::Value::Array(items)) => {
            for item in items {
                let Some(address) = item.as_str() else {
                    bail!(
                        "{origin}: `substituters` holds {}, not a string\n  fix       write substituters = [\"oci://REGISTRY/REPOSITORY\"]",
                        item.type_str()
                    );
                };
                config.substituters.push(SubstituterEntry {
                    address: address.to_owned(),
                    origin: origin.to_owned(),
                });
            }
        }
        Some(other) => bail!(
            "{origin}: `substituters` is {}, not a list\n  fix       write substituters = [\"oci://REGISTRY/REPOSITORY\"]",
            other.type_str()
        ),
    }
    Ok(config)
}

/// The ordered substituters of this command: `AGENTPACK_SUBSTITUTERS` first, then the config
/// file's (duplicates are dropped later, keeping the first).
pub fn substituter_entries() -> Result<Vec<SubstituterEntry>> {
    let mut entries = env::var(EnvVars::AGENTPACK_SUBSTITUTERS)
        .map(|value| split_list(&value, EnvVars::AGENTPACK_SUBSTITUTERS))
        .unwrap_or_default();
    entries.extend(load()?.substituters);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;

    #[test]
    fn reads_the_substituters_and_refuses_wrong_types() {
        let config = parse(
            "substituters = [\"oci://a/b\", \"oci://c/d\"]\nother = 1\n",
            "config.toml",
        )
        .unwrap();
        let addresses: Vec<&str> = config
            .substituters
            .iter()
            .map(|e| e.address.as_str())
            .collect();
        assert_eq!(addresses, ["oci://a/b", "oci://c/d"]);
        assert_eq!(parse("", "c").unwrap(), UserConfig::default());
        let error = parse("substituters = \"oci://a/b\"", "c.toml").unwrap_err();
        assert!(error.to_string().contains("not a list"), "{error}");
        let error = parse("substituters = [1]", "c.toml").unwrap_err();
        assert!(error.to_string().contains("not a string"), "{error}");
        assert!(parse("substituters = [", "c.toml").is_err());
    }
}
