//! What a probe observed, as stored in a receipt: the artifacts a native client listed, the hook
//! outcomes, repeated-sample winners and other-scope observations. Data only (serde); the probe
//! writes it, preflight and `probe diff` read it.

use serde::{Deserialize, Serialize};

/// One observed artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// `skill`, `command` or `agent`.
    pub category: String,
    /// The storage name (the bundle prefix removed).
    pub name: String,
    /// What the client calls it (`agentpack-bundle:name`, or the name).
    pub native_id: String,
    /// Who provides the winner: `package` (the staged tree) or `other` (built in, user...).
    pub winner: String,
    /// `workspace_session` or `controlled_projection`.
    pub scope: String,
}

/// One hook's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookOutcome {
    pub event: String,
    pub name: String,
    pub exit_code: Option<i64>,
    pub outcome: String,
}

/// A parsed catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    pub artifacts: Vec<Observed>,
    pub hooks: Vec<HookOutcome>,
    /// Every winner a repeatedly sampled listing chose (OpenCode's `debug skill`), per artifact;
    /// empty for a listing read once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub winners_seen: Vec<WinnersSeen>,
    /// Artifacts observed in a scope other than the receipt's own (Claude Code's `plugin
    /// validate` of the staged bundle, `controlled_projection`). They never answer a requirement
    /// of the receipt's scope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_scopes: Vec<Observed>,
    /// Other observed properties of the staged tree (Claude Code's `plugin details` inventory),
    /// each with its own status: one a client could not observe is `unknown`, never guessed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

/// One observed property beyond the artifact lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Property {
    /// What was asked (`plugin_details`).
    pub name: String,
    /// `workspace_session` or `controlled_projection`.
    pub scope: String,
    /// `observed` or `unknown`.
    pub status: String,
    /// What was observed (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Why it is unknown, or what did not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The winners one artifact had over the samples of a listing: `(winner, times)`, where the
/// winner is `package` or `other`, and how many samples listed it at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WinnersSeen {
    pub category: String,
    pub name: String,
    pub winners: Vec<(String, usize)>,
    pub listed_in: usize,
    pub samples: usize,
}

/// How many listings a sampled probe (OpenCode's `debug skill`) took, and why that many: one when
/// no skill name had more than one candidate, else the sample count, with the name that had a
/// choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampling {
    pub samples: usize,
    pub reason: String,
}
