//! The preflight check: a pure, offline, explainable report of what one agent will load. Shared
//! by `agentpack preflight` (which prints it) and the strict external launch (which refuses to
//! start on a blocking finding); no command owns it and it calls no command module.
//!
//! It reads the manifest, the lock, the cache slots the lock names, the staged tree's record, the
//! workspace and the user-level places the agent also reads, renders the agent's plan in memory
//! with the same renderer staging uses, evaluates `contract.json` (or `--contract`) with
//! [`agentpack_builders::contract`], and reports findings with stable codes. It never writes: no
//! download, no repair, no lock rewrite, no staging, no overlay, no index row, no home layer, no
//! project lock (the dispatcher takes none for it), and it never opens the store through
//! `Store::open` (which creates directories).
//!
//! Exit classes: 0 ready (warnings included), 2 usage or policy error, 3 a requirement violated,
//! 4 a required observation unknown, 5 operational failure.
//!
//! Layout: `run` (the check itself), `requirements` (a contract requirement's finding and what
//! the plan knows of a property), `sources` (the declared sources and the digest framing),
//! `human` (the text summary), and the inspections it composes. [`evaluate_default_contract`] is
//! the strict launch's entry: the same check for the generation the launch leases.

mod finding;
mod human;
mod inherit;
mod inspect;
mod observed;
mod plan;
mod requirements;
mod run;
mod sources;

pub use human::human;
pub use run::preflight;

use std::path::{Path, PathBuf};

use agentpack_builders::contract;
use agentpack_harness::Agent;
use anyhow::Result;
use serde::Serialize;

use crate::context::Context;
use crate::evidence::policy::{Policy, CONTRACT_FILE};
use crate::evidence::receipt::{self, Located};
use crate::project::Project;
use agentpack_builders::project::ProjectSession;

use finding::{code, Finding, Severity};

/// What to check: the agent, the policy, the contract file and the receipt (the command's flags).
#[derive(Debug)]
pub struct Request<'a> {
    pub agent: String,
    pub policy: Policy,
    /// The contract to evaluate (default: contract.json beside agentpack.toml, when there is one).
    pub contract: Option<PathBuf>,
    /// A receipt id, a receipt file, or `latest`.
    pub receipt: Option<String>,
    /// The generation to check (a strict launch's leased one); `None`: the mode's pointer.
    pub generation: Option<PathBuf>,
    /// What the caller already opened (a strict launch's); preflight opens what is not given.
    pub opened: Opened<'a>,
}

/// What a caller of [`preflight`] already has open, so the check neither discovers the project
/// again, nor reads the definition and the lock a second time, nor looks for the receipt again.
#[derive(Debug, Default)]
pub struct Opened<'a> {
    /// The project; `None`: discovered from the context.
    pub project: Option<&'a Project>,
    /// A read-only session of that project whose bytes are current (nothing wrote the files since
    /// it read them); `None`: one is opened.
    pub session: Option<&'a ProjectSession>,
    /// The receipt [`Request::receipt`] names, already located (and, for `latest`, read) in the
    /// project's receipt directory; `None`: preflight locates it.
    pub receipt: Option<Located>,
}

/// The exit codes.
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_VIOLATED: u8 = 3;
pub const EXIT_UNKNOWN: u8 = 4;
pub const EXIT_OPERATIONAL: u8 = 5;

/// Why preflight stopped before it had a report.
pub enum Stop {
    Usage(anyhow::Error),
    Operational(anyhow::Error),
}

/// What a strict external launch learns from evaluating the default contract for its agent.
pub struct Evaluation {
    /// The preflight exit class: 0 ready, 2 usage, 3 violated, 4 unknown, 5 operational.
    pub exit_code: u8,
    /// The contract evaluated.
    pub contract: PathBuf,
    /// The blocking findings (violations, required unknowns, errors), then the receipt findings
    /// that explain an unknown (missing, stale, unusable), each as `CODE target: message` and
    /// its remedy; or the reason preflight stopped.
    pub blocking: Vec<(String, String)>,
}

/// The launch's entry point: evaluates `contract.json` beside the definition for `agent`, exactly
/// as `agentpack --strict-external preflight --agent A --policy local --receipt latest` would, but
/// for `generation` (the one the launch holds its lease on) rather than whatever the mode's pointer
/// selects by then. The policy is `local` (a launcher takes no `--policy`); the agent's newest
/// receipt is attached when the project has one, under preflight's freshness rules (a stale,
/// failed or other-policy receipt answers nothing, so its `observed` requirements stay unknown),
/// and without one they stay unknown too. `None` when the definition has no contract. Writes
/// nothing and prints nothing. `opened` is the launch's: its project, and its read-only session
/// when nothing was staged since that read the definition and the lock.
pub fn evaluate_default_contract(
    ctx: &Context,
    agent: Agent,
    generation: &Path,
    project: &Project,
    session: Option<&ProjectSession>,
) -> Result<Option<Evaluation>> {
    let contract = project.root.join(CONTRACT_FILE);
    if !contract.is_file() {
        return Ok(None);
    }
    let (receipt, located) = newest_receipt(project, agent);
    let args = Request {
        agent: agent.as_str().to_owned(),
        policy: Policy::Local,
        contract: Some(contract.clone()),
        receipt,
        generation: Some(generation.to_path_buf()),
        opened: Opened {
            project: Some(project),
            session,
            receipt: located,
        },
    };
    let evaluation = match run::preflight(ctx, args) {
        Ok(report) => Evaluation {
            exit_code: report.exit_code,
            contract,
            blocking: report
                .findings
                .iter()
                .filter(|f| matches!(f.severity, Severity::Violation | Severity::Error))
                .chain(report.findings.iter().filter(|f| {
                    report.exit_code != 0
                        && matches!(
                            f.code,
                            code::RECEIPT_MISSING | code::RECEIPT_STALE | code::RECEIPT_UNUSABLE
                        )
                }))
                .map(|f| {
                    (
                        format!("{} {}: {}", f.code, f.target, f.message),
                        f.remedy.clone(),
                    )
                })
                .collect(),
        },
        Err(Stop::Usage(err)) => Evaluation {
            exit_code: EXIT_USAGE,
            contract,
            blocking: vec![(format!("{err:#}"), String::new())],
        },
        Err(Stop::Operational(err)) => Evaluation {
            exit_code: EXIT_OPERATIONAL,
            contract,
            blocking: vec![(format!("{err:#}"), String::new())],
        },
    };
    Ok(Some(evaluation))
}

/// The receipt a strict launch attaches: `latest` when the project holds a receipt of `agent`,
/// whatever its state (a failed or old-format one is attached all the same, so the report says why
/// it answers nothing), located here once (the newest successful one read once, and not again by
/// preflight); no reference when there is none.
fn newest_receipt(project: &Project, agent: Agent) -> (Option<String>, Option<Located>) {
    let dir = project.state_dir().join(receipt::DIR);
    match receipt::locate(&dir, "latest", agent.as_str(), &dir) {
        Ok(located) => (Some("latest".to_owned()), Some(located)),
        // Receipts, none successful: preflight's `latest` names the ones it passed over.
        Err(receipt::ReceiptError::None { skipped, .. }) if skipped.is_empty() => (None, None),
        Err(_) => (Some("latest".to_owned()), None),
    }
}

/// The identities a report is bound to.
#[derive(Debug, Serialize)]
pub struct Identities {
    /// Manifest and lock bytes, whatever the checkout's location.
    source: String,
    lock: Option<String>,
    mode: String,
    workspace_inputs: Option<String>,
    policy: String,
    /// The store path name of the staged generation, when one is selected.
    staged_generation: Option<String>,
    /// SHA-256 of that name and the generation's staged manifest (its store record).
    generation: Option<String>,
}

/// The report `--json` prints.
#[derive(Debug, Serialize)]
pub struct Report {
    agent: String,
    mode: String,
    policy: Policy,
    ready: bool,
    pub exit_code: u8,
    definition_root: PathBuf,
    workspace: PathBuf,
    contract: Option<PathBuf>,
    identities: Identities,
    plan: PlanSummary,
    findings: Vec<Finding>,
    requirements: Vec<contract::Outcome>,
}

#[derive(Debug, Serialize)]
pub struct PlanSummary {
    complete: bool,
    artifacts: Vec<plan::Artifact>,
    mcp_servers: Vec<String>,
    workspace_writes: Vec<String>,
}

/// 5 on an operational error, else 3 on a violation, else 4 on a blocking unknown, else 0.
pub(super) fn exit_code(findings: &[Finding]) -> u8 {
    if findings.iter().any(|f| f.severity == Severity::Error) {
        return EXIT_OPERATIONAL;
    }
    let blocking = |f: &&Finding| f.severity == Severity::Violation;
    if findings
        .iter()
        .filter(blocking)
        .any(|f| f.code != code::REQUIREMENT_UNKNOWN)
    {
        return EXIT_VIOLATED;
    }
    if findings.iter().any(|f| blocking(&f)) {
        return EXIT_UNKNOWN;
    }
    0
}
