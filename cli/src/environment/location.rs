//! Where environments live: `$AGENTPACK_HOME/environments/<NAME>` (or the directory `env --dir`
//! names), and which names an environment may have.
//!
//! Owns the name rule and the path of one environment; never creates or reads anything.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// The directory under `AGENTPACK_HOME` that holds the environments.
pub const ENVIRONMENTS_DIR: &str = "environments";

/// `$AGENTPACK_HOME/environments`.
pub fn environments_dir(agentpack_home: &Path) -> PathBuf {
    agentpack_home.join(ENVIRONMENTS_DIR)
}

/// `$AGENTPACK_HOME/environments/<name>`, after checking the name.
pub fn environment_dir(agentpack_home: &Path, name: &str) -> Result<PathBuf> {
    check_name(name)?;
    Ok(environments_dir(agentpack_home).join(name))
}

/// An environment name is one path component: ASCII letters, digits, `.`, `_` and `-`, starting
/// with a letter or a digit, at most 64 characters (so it can never name a parent directory, a
/// hidden temporary directory, or a path).
pub fn check_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        bail!(
            "{name:?} is not an environment name\n  fix  use letters, digits, `.`, `_` and `-`, starting with a letter or a digit (at most 64 characters)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn names_are_single_safe_components() {
        for good in ["team", "ci-2", "a.b_c", "X"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "-x",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
