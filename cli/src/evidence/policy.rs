//! The inheritance policy a preflight runs under (and a probe receipt may be bound to), and the
//! name of the contract file beside the definition. Shared by `preflight`, `probe` and the strict
//! launch check; no command owns it.

use clap::ValueEnum;
use serde::Serialize;

pub use agentpack_builders::contract::CONTRACT_FILE;

/// The inheritance policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    Local,
    Ci,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Local => "local",
            Policy::Ci => "ci",
        }
    }
}
