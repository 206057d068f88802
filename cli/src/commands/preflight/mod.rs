//! `agentpack preflight --agent A`: a pure, offline, explainable check of what one agent will load.
//!
//! It reads the manifest, the lock, the cache slots the lock names, the staged tree's record, the
//! workspace and the user-level places the agent also reads, renders the agent's plan in memory
//! with the same renderer staging uses, evaluates `contract.json` (or `--contract`), and reports
//! findings with stable codes. It never writes: no download, no repair, no lock rewrite, no
//! staging, no overlay, no index row, no home layer, no project lock (the dispatcher takes none
//! for it), and it never opens the store through `Store::open` (which creates directories).
//!
//! Exit codes (returned, never `process::exit`): 0 ready (warnings included), 2 usage or policy
//! error, 3 a requirement violated, 4 a required observation unknown, 5 operational failure.

mod contract;
mod finding;
pub(crate) mod identity;
mod inherit;
mod inspect;
mod observed;
mod plan;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_harness::Agent;
use anyhow::{Context as _, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::output;
use crate::project::Project;

use contract::{Contract, Known, Requirement, Status};
use finding::{code, Finding, Severity};

/// The contract file beside the definition.
pub const CONTRACT_FILE: &str = "contract.json";

#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// The agent whose effective configuration to check.
    #[arg(long, value_parser = ["claude", "cursor", "opencode", "codex", "grok", "agy"])]
    pub agent: String,
    /// How inherited configuration and pin gaps count: `local` reports them, `ci` makes MCP pin
    /// gaps and unverified packages violations.
    #[arg(long, value_enum, default_value_t = Policy::Local)]
    pub policy: Policy,
    /// The contract to evaluate (default: contract.json beside agentpack.toml, when there is one).
    #[arg(long, value_name = "FILE")]
    pub contract: Option<PathBuf>,
    /// The probe receipt whose observations answer `observed` requirements: a receipt id, a
    /// receipt file, or `latest` (the newest receipt of the agent, never an older one).
    #[arg(long, value_name = "ID|PATH|latest")]
    pub receipt: Option<String>,
    // `--strict-external` is the global flag (`Context::strict_external`): planned workspace
    // writes are violations, and under `--policy ci` so is inherited configuration.
}

/// The inheritance policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    Local,
    Ci,
}

impl Policy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Policy::Local => "local",
            Policy::Ci => "ci",
        }
    }
}

/// The exit codes.
const EXIT_USAGE: u8 = 2;
const EXIT_VIOLATED: u8 = 3;
const EXIT_UNKNOWN: u8 = 4;
const EXIT_OPERATIONAL: u8 = 5;

/// Why preflight stopped before it had a report.
enum Stop {
    Usage(anyhow::Error),
    Operational(anyhow::Error),
}

pub fn run(ctx: &Context, args: &PreflightArgs) -> Result<ExitCode> {
    match preflight(ctx, args) {
        Ok(report) => {
            let exit = report.exit_code;
            if ctx.json {
                output::json(&report)?;
            } else {
                output::stdout(&human(&report))?;
            }
            Ok(ExitCode::from(exit))
        }
        Err(Stop::Usage(err)) => {
            output::print_error(&err);
            Ok(ExitCode::from(EXIT_USAGE))
        }
        Err(Stop::Operational(err)) => {
            output::print_error(&err);
            Ok(ExitCode::from(EXIT_OPERATIONAL))
        }
    }
}

/// What a strict external launch learns from evaluating the default contract for its agent.
pub(crate) struct Evaluation {
    /// The preflight exit class: 0 ready, 2 usage, 3 violated, 4 unknown, 5 operational.
    pub(crate) exit_code: u8,
    /// The contract evaluated.
    pub(crate) contract: PathBuf,
    /// The blocking findings (violations, required unknowns, errors), each as
    /// `CODE target: message` and its remedy; or the reason preflight stopped.
    pub(crate) blocking: Vec<(String, String)>,
}

/// The launch's entry point: evaluates `contract.json` beside the definition for `agent` under
/// `policy` (no receipt, so `observed` requirements stay unknown), exactly as `preflight` does.
/// `None` when the definition has no contract. Writes nothing and prints nothing.
pub(crate) fn evaluate_default_contract(
    ctx: &Context,
    agent: Agent,
    policy: Policy,
) -> Result<Option<Evaluation>> {
    let project = Project::discover(ctx)?;
    let contract = project.root.join(CONTRACT_FILE);
    if !contract.is_file() {
        return Ok(None);
    }
    let args = PreflightArgs {
        agent: agent.as_str().to_owned(),
        policy,
        contract: Some(contract.clone()),
        receipt: None,
    };
    let evaluation = match preflight(ctx, &args) {
        Ok(report) => Evaluation {
            exit_code: report.exit_code,
            contract,
            blocking: report
                .findings
                .iter()
                .filter(|f| matches!(f.severity, Severity::Violation | Severity::Error))
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

/// The identities a report is bound to.
#[derive(Debug, Serialize)]
struct Identities {
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
struct Report {
    agent: String,
    mode: String,
    policy: Policy,
    ready: bool,
    exit_code: u8,
    definition_root: PathBuf,
    workspace: PathBuf,
    contract: Option<PathBuf>,
    identities: Identities,
    plan: PlanSummary,
    findings: Vec<Finding>,
    requirements: Vec<contract::Outcome>,
}

#[derive(Debug, Serialize)]
struct PlanSummary {
    complete: bool,
    artifacts: Vec<plan::Artifact>,
    mcp_servers: Vec<String>,
    workspace_writes: Vec<String>,
}

fn read_optional(path: &Path) -> std::result::Result<Option<Vec<u8>>, anyhow::Error> {
    match agentpack_lockfile::read_regular_file(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(anyhow::Error::new(err).context(format!("cannot read {}", path.display()))),
    }
}

fn preflight(ctx: &Context, args: &PreflightArgs) -> std::result::Result<Report, Stop> {
    let agent = Agent::from_name(&args.agent)
        .ok_or_else(|| Stop::Usage(anyhow::anyhow!("unknown agent `{}`", args.agent)))?;
    let project = Project::discover(ctx).map_err(Stop::Usage)?;
    let manifest_bytes = agentpack_lockfile::read_regular_file(&project.manifest_path)
        .with_context(|| format!("cannot read {}", project.manifest_path.display()))
        .map_err(Stop::Operational)?;
    let lock_bytes = read_optional(&project.lock_path).map_err(Stop::Operational)?;
    let manifest = project.load_manifest().map_err(Stop::Operational)?;
    let lock = project.load_lock(&manifest).map_err(Stop::Operational)?;
    let mode = crate::commands::sync::resolve_mode(ctx, &manifest).map_err(Stop::Usage)?;

    let contract_path = match &args.contract {
        Some(path) => Some(ctx.cwd.join(path)),
        None => {
            let beside = project.root.join(CONTRACT_FILE);
            beside.is_file().then_some(beside)
        }
    };
    let (contract, contract_bytes) = match &contract_path {
        None => (None, None),
        Some(path) => {
            let bytes = agentpack_lockfile::read_regular_file(path)
                .with_context(|| {
                    format!(
                        "cannot read the contract {}\n  fix  pass an existing file as --contract",
                        path.display()
                    )
                })
                .map_err(Stop::Usage)?;
            let contract = contract::parse(&bytes)
                .map_err(|err| {
                    anyhow::anyhow!(
                        "the contract {} is invalid: {err}\n  fix  correct that entry (see docs/src/preflight.md for the schema)",
                        path.display()
                    )
                })
                .map_err(Stop::Usage)?;
            (Some(contract), Some(bytes))
        }
    };

    let home = env::var(EnvVars::HOME).map(PathBuf::from);
    let config_home = env::var(EnvVars::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let cache_dir = project.home.root.join("cache");
    let mut findings = Vec::new();

    findings.extend(inspect::lock_drift(&manifest, &lock, &project.root));
    findings.extend(inspect::unverified(
        &lock,
        args.policy,
        env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED),
    ));
    let slots: BTreeMap<String, plan::SlotCheck> = lock
        .packages
        .iter()
        .map(|package| {
            (
                package.module.as_str().to_owned(),
                plan::check_slot(&cache_dir, package),
            )
        })
        .collect();
    findings.extend(inspect::cache(&slots, &cache_dir));
    findings.extend(inspect::staging(
        &project.staging_root,
        &mode.name,
        &mode.dir,
        &slots,
        &project.workspace,
        &cache_dir,
    ));

    let state_dir = project.state_dir();
    let agent_plan = plan::agent_plan(&plan::PlanInputs {
        agent,
        manifest: &manifest,
        lock: &lock,
        mode: &mode,
        workspace: &project.workspace,
        agentpack_home: &project.home.root,
        state_dir: &state_dir,
        slots: &slots,
        yolo: ctx.yolo,
    })
    .map_err(Stop::Operational)?;
    if let Some(staged) = ModePointer::new(&project.staging_root, &mode.dir)
        .current()
        .filter(|target| target.is_dir())
    {
        let differences = plan::staged_differences(&agent_plan, &staged);
        if !differences.is_empty() && agent_plan.complete() {
            findings.push(Finding::new(
                code::STAGING_STALE,
                Severity::Warning,
                staged.display().to_string(),
                agent.as_str(),
                format!(
                    "the staged tree of {} differs from what the current inputs plan ({} file(s), first {})",
                    agent.display_name(),
                    differences.len(),
                    differences[0]
                ),
                "run `agentpack sync` to rebuild the staged tree from the current inputs",
            ));
        }
    }
    if !agent_plan.complete() {
        findings.push(Finding::new(
            code::PLAN_INCOMPLETE,
            Severity::Warning,
            "pack.lock",
            agent.as_str(),
            format!(
                "the plan leaves out {} (no verified cache entry): absence in the plan is unknown",
                agent_plan.left_out.join(", ")
            ),
            "run `agentpack env restore` so every locked package is in the cache",
        ));
    }
    for collision in &agent_plan.collisions {
        findings.push(Finding::new(
            code::PLAN_COLLISION,
            Severity::Info,
            collision.renamed_from.clone(),
            format!("{}:{}", agent.as_str(), collision.path),
            format!(
                "{} and {} both stage {} ({} clash): {} keeps the name, the other is staged as {}",
                collision.kept_by,
                collision.renamed_from,
                collision.path,
                collision.clash,
                collision.kept_by,
                collision.renamed_to
            ),
            "rename one of them, or disable one in the mode, if both are not wanted",
        ));
    }
    for warning in &agent_plan.warnings {
        findings.push(Finding::new(
            code::PLAN_WARNING,
            Severity::Info,
            "plan",
            agent.as_str(),
            warning.clone(),
            "",
        ));
    }
    findings.extend(inspect::mcp(&agent_plan.mcp_servers, &lock, args.policy));
    findings.extend(inspect::secrets(&manifest, &lock));

    // Strict external CI: configuration the agent inherits is undeclared, so a violation.
    // A place the contract declares (`inheritance.allow`) is info, never a violation.
    let declared = |place: &inherit::InheritedPlace| {
        contract
            .as_ref()
            .is_some_and(|c| c.declares_inherited(place.scope, &place.shown))
    };
    let inherited_severity = |local: Severity, place: &inherit::InheritedPlace| {
        if declared(place) {
            Severity::Info
        } else if ctx.strict_external && args.policy == Policy::Ci {
            Severity::Violation
        } else {
            local
        }
    };
    let places = inherit::places_for(
        agent,
        &project.workspace,
        home.as_deref(),
        config_home.as_deref(),
    );
    let inherited = inherit::scan(places, &agent_plan);
    for found in &inherited {
        let place = &found.place;
        if found.shadows.is_empty() {
            findings.push(Finding::new(
                code::INHERITED_CONFIG,
                inherited_severity(Severity::Info, place),
                place.path.display().to_string(),
                agent.as_str(),
                format!(
                    "{} also loads {} ({}-level configuration agentpack does not manage){}",
                    agent.display_name(),
                    place.shown,
                    place.scope,
                    if declared(place) {
                        ", declared in the contract's inheritance.allow"
                    } else {
                        ""
                    }
                ),
                "move it into a package or .agents/ if the environment should carry it, or remove it",
            ));
        }
        for (category, name) in &found.shadows {
            let module = agent_plan
                .artifacts
                .get(&(*category, name.clone()))
                .and_then(|a| a.module.clone())
                .unwrap_or_else(|| "the plan".to_owned());
            findings.push(Finding::new(
                code::INHERITED_SHADOW,
                inherited_severity(Severity::Warning, place),
                place.path.join(name).display().to_string(),
                format!("{category}:{name}"),
                format!(
                    "{} also loads the {category} `{name}` from {} ({}-level), and {module} packages a {category} of the same name: one shadows the other",
                    agent.display_name(),
                    place.shown,
                    place.scope
                ),
                format!("remove or rename {}/{name}, or rename the packaged {category}", place.shown),
            ));
        }
    }
    for write in &agent_plan.workspace_writes {
        let (severity, remedy) = if ctx.strict_external {
            (
                Severity::Violation,
                "a strict external launch writes nothing in the checkout: use Claude or OpenCode, or drop --strict-external",
            )
        } else {
            (Severity::Info, "")
        };
        findings.push(Finding::new(
            code::WORKSPACE_WRITE_PLANNED,
            severity,
            "plan",
            project.workspace.join(write).display().to_string(),
            format!(
                "launching {} places a link at {write} in the workspace",
                agent.display_name()
            ),
            remedy,
        ));
    }

    let places =
        identity::fingerprint_places(&project.workspace, home.as_deref(), config_home.as_deref());
    let workspace_inputs = match identity::workspace_input_digest(&places) {
        Ok(digest) => Some(digest),
        Err(err) => {
            findings.push(Finding::new(
                code::WORKSPACE_UNREADABLE,
                Severity::Error,
                "workspace",
                agent.as_str(),
                err.to_string(),
                "remove the link cycle or make the file readable",
            ));
            None
        }
    };

    let staged_target = ModePointer::new(&project.staging_root, &mode.dir).current();
    let (receipt, unavailable) = match &args.receipt {
        None => (
            None,
            "needs observed evidence, and no probe receipt was given (RECEIPT_MISSING): planned or locked evidence is never promoted to observed",
        ),
        Some(reference) => {
            let mut current = crate::commands::probe::current_identities(
                &project,
                &manifest_bytes,
                lock_bytes.as_deref(),
                &mode.name,
                staged_target.as_deref(),
            );
            current.policy = Some(identity::policy_digest(
                args.policy.as_str(),
                ctx.strict_external,
                contract_bytes.as_deref(),
            ));
            let (receipt, receipt_findings) = observed::attach(
                reference,
                &project.state_dir().join(crate::commands::probe::receipt::DIR),
                agent.as_str(),
                &ctx.cwd,
                &current,
            );
            findings.extend(receipt_findings);
            (
                receipt,
                "needs observed evidence, and the receipt given is not current (see the RECEIPT_ finding): planned or locked evidence is never promoted to observed",
            )
        }
    };
    let mut requirements = Vec::new();
    if let Some(contract) = &contract {
        let lookup = |requirement: &Requirement| known(requirement, &agent_plan, &lock, &inherited);
        let observed_lookup = |requirement: &Requirement| {
            observed::lookup(receipt.as_ref(), unavailable, requirement)
        };
        let mut receipt_missing = false;
        for requirement in &contract.requirements {
            let outcome = contract::evaluate(
                contract,
                requirement,
                agent.as_str(),
                &lookup,
                &observed_lookup,
            );
            receipt_missing |= outcome.needs_receipt;
            if let Some(finding) = requirement_finding(contract, &outcome, contract_path.as_deref())
            {
                findings.push(finding);
            }
            requirements.push(outcome);
        }
        if receipt_missing && args.receipt.is_none() {
            findings.push(Finding::new(
                code::RECEIPT_MISSING,
                Severity::Info,
                contract_path
                    .as_ref()
                    .map_or_else(String::new, |p| p.display().to_string()),
                agent.as_str(),
                "observed evidence was required and no probe receipt was given: those requirements stay unknown",
                format!("run `agentpack probe --agent {}` and pass `--receipt latest`, or relax `unknown_required`", agent.as_str()),
            ));
        }
    }

    let exit_code = exit_code(&findings);
    let staged =
        agentpack_builders::generation::pointer::ModePointer::new(&project.staging_root, &mode.dir)
            .current()
            .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()));
    Ok(Report {
        agent: agent.as_str().to_owned(),
        mode: mode.name.clone(),
        policy: args.policy,
        ready: exit_code == 0,
        exit_code,
        definition_root: project.root.clone(),
        workspace: project.workspace.clone(),
        contract: contract_path,
        identities: Identities {
            source: identity::source_identity(&manifest_bytes, lock_bytes.as_deref()),
            lock: identity::lock_identity(lock_bytes.as_deref()),
            mode: mode.name.clone(),
            workspace_inputs,
            policy: identity::policy_digest(
                args.policy.as_str(),
                ctx.strict_external,
                contract_bytes.as_deref(),
            ),
            generation: staged
                .as_deref()
                .and_then(|name| identity::generation_digest(name, &cache_dir)),
            staged_generation: staged,
        },
        plan: PlanSummary {
            complete: agent_plan.complete(),
            artifacts: agent_plan.artifacts.values().cloned().collect(),
            mcp_servers: agent_plan
                .mcp_servers
                .iter()
                .map(|s| s.name.clone())
                .collect(),
            workspace_writes: agent_plan.workspace_writes.clone(),
        },
        findings,
        requirements,
    })
}

/// 5 on an operational error, else 3 on a violation, else 4 on a blocking unknown, else 0.
fn exit_code(findings: &[Finding]) -> u8 {
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

/// The finding of a requirement that is not simply satisfied (or not applicable).
fn requirement_finding(
    contract: &Contract,
    outcome: &contract::Outcome,
    source: Option<&Path>,
) -> Option<Finding> {
    let source = source.map_or_else(String::new, |p| format!("{}#{}", p.display(), outcome.id));
    let target = outcome.target.clone();
    let (code, severity, remedy) = match outcome.status {
        Status::Satisfied | Status::NotApplicable => return None,
        Status::Allowed => (code::REQUIREMENT_ALLOWED, Severity::Info, String::new()),
        Status::Violated => (
            code::REQUIREMENT_VIOLATED,
            if outcome.blocking {
                Severity::Violation
            } else if outcome.severity == "info" {
                Severity::Info
            } else {
                Severity::Warning
            },
            "change the definition so the requirement holds, or add an allowance with a rationale"
                .to_owned(),
        ),
        Status::Unknown => (
            code::REQUIREMENT_UNKNOWN,
            match contract.unknown_required {
                contract::UnknownRequired::Fail => Severity::Violation,
                contract::UnknownRequired::Warn => Severity::Warning,
                contract::UnknownRequired::Allow => Severity::Info,
            },
            if outcome.needs_receipt {
                format!("run `agentpack probe --agent {}` for the current inputs and pass `--receipt latest`, or lower minimum_evidence / set unknown_required", outcome.target)
            } else {
                "make the evidence available (for example `agentpack env restore`), or lower minimum_evidence".to_owned()
            },
        ),
    };
    Some(Finding::new(
        code,
        severity,
        source,
        target,
        format!("requirement `{}`: {}", outcome.id, outcome.message),
        remedy,
    ))
}

/// What the plan and the lock know of the property a requirement selects.
fn known(
    requirement: &Requirement,
    plan: &plan::AgentPlan,
    lock: &agentpack_lockfile::Lockfile,
    inherited: &[inherit::Inherited],
) -> Known {
    use contract::Evidence::{Declared, Generated};
    let name = requirement.name.clone().unwrap_or_default();
    let incomplete = || {
        Known::Unknown(format!(
            "the plan is incomplete (no verified cache entry for {}), so absence is unknown",
            plan.left_out.join(", ")
        ))
    };
    match requirement.category.as_str() {
        category @ ("skill" | "command" | "agent") => {
            let category: &'static str = match category {
                "skill" => "skill",
                "command" => "command",
                _ => "agent",
            };
            let artifact = plan.artifacts.get(&(category, name.clone()));
            match (requirement.property.as_str(), artifact) {
                ("presence", Some(_)) => Known::Value(Value::Bool(true), Generated),
                ("presence", None) if plan.complete() => {
                    Known::Value(Value::Bool(false), Generated)
                }
                ("presence", None) => incomplete(),
                ("source_digest", artifact) => source_digest_known(
                    plan,
                    category,
                    &name,
                    artifact.and_then(|a| a.module.as_deref()),
                ),
                (_, None) => Known::Unknown(format!("the plan has no {category} `{name}`")),
                ("rendered_digest", Some(a)) => {
                    Known::Value(Value::String(a.rendered_digest.clone()), Generated)
                }
                ("winner", Some(_)) => Known::Value(
                    Value::String(inherit::planned_winner(inherited, category, &name).to_owned()),
                    Generated,
                ),
                ("source", Some(a)) => match &a.module {
                    Some(module) => Known::Value(Value::String(module.clone()), Generated),
                    None => Known::Unknown(format!(
                        "the plan generates {category} `{name}` without naming its package"
                    )),
                },
                (property, Some(_)) => Known::Unknown(format!(
                    "{category}.{property} is not computed by preflight"
                )),
            }
        }
        "mcp_server" => match requirement.property.as_str() {
            "presence" => {
                let present = plan.mcp_servers.iter().any(|s| s.name == name);
                if present || plan.complete() {
                    Known::Value(Value::Bool(present), Generated)
                } else {
                    incomplete()
                }
            }
            _ => Known::Value(
                Value::String(
                    lock.mcp_server(&name)
                        .map_or("unlocked", |record| record.status.as_str())
                        .to_owned(),
                ),
                Declared,
            ),
        },
        "package" => {
            let package = lock
                .packages
                .iter()
                .find(|p| p.module.as_str() == name || p.name.as_deref() == Some(name.as_str()));
            match (requirement.property.as_str(), package) {
                ("presence", package) => Known::Value(Value::Bool(package.is_some()), Declared),
                (_, None) => Known::Unknown(format!("pack.lock has no package `{name}`")),
                ("commit", Some(p)) => {
                    Known::Value(Value::String(p.commit.as_str().to_owned()), Declared)
                }
                (_, Some(p)) => Known::Value(
                    p.content_hash
                        .as_ref()
                        .map_or(Value::Null, |h| Value::String(h.as_str().to_owned())),
                    Declared,
                ),
            }
        }
        _ => {
            if plan.workspace_writes.is_empty() && !plan.complete() {
                return incomplete();
            }
            Known::Value(
                Value::Array(
                    plan.workspace_writes
                        .iter()
                        .cloned()
                        .map(Value::String)
                        .collect(),
                ),
                Generated,
            )
        }
    }
}

/// The `source_digest` of a selected artifact: declared evidence, from the lock-verified store copy
/// of the one package that holds it (`module`, when the plan names the package it stages it from).
fn source_digest_known(
    plan: &plan::AgentPlan,
    category: &'static str,
    name: &str,
    module: Option<&str>,
) -> Known {
    let found = match plan::source_digests(plan, category, name, module) {
        Ok(found) => found,
        Err(err) => return Known::Unknown(format!("{category}.source_digest: {err:#}")),
    };
    let digests: std::collections::BTreeSet<&str> =
        found.iter().map(|(_, digest)| digest.as_str()).collect();
    match (digests.len(), found.first()) {
        (1, Some((_, digest))) => {
            Known::Value(Value::String(digest.clone()), contract::Evidence::Declared)
        }
        (0, _) if !plan.complete() => Known::Unknown(format!(
            "no verified package holds {category} `{name}`, and the plan is incomplete (no verified cache entry for {})",
            plan.left_out.join(", ")
        )),
        (0, _) => Known::Unknown(format!(
            "no locked package holds {category} `{name}` (an artifact of the workspace overlay has no declared source)"
        )),
        _ => Known::Unknown(format!(
            "{category} `{name}` is in several packages with different sources ({}): the source is ambiguous",
            found.iter().map(|(module, _)| module.as_str()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The human summary.
fn human(report: &Report) -> String {
    let mut out = format!(
        "preflight {} (mode {}, policy {}): {}\n",
        report.agent,
        report.mode,
        report.policy.as_str(),
        match report.exit_code {
            0 => "ready".to_owned(),
            EXIT_VIOLATED => "not ready: a requirement is violated (exit 3)".to_owned(),
            EXIT_UNKNOWN => "not ready: a required observation is unknown (exit 4)".to_owned(),
            code => format!("not ready (exit {code})"),
        }
    );
    let mut findings: Vec<&Finding> = report.findings.iter().collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    for finding in findings {
        out.push_str(&format!(
            "  {:<9} {} {}: {}\n",
            finding.severity.as_str(),
            finding.code,
            finding.target,
            finding.message
        ));
        if !finding.remedy.is_empty() {
            out.push_str(&format!("            fix  {}\n", finding.remedy));
        }
    }
    if !report.requirements.is_empty() {
        let count = |status: Status| {
            report
                .requirements
                .iter()
                .filter(|o| o.status == status)
                .count()
        };
        out.push_str(&format!(
            "  contract: {} satisfied, {} violated, {} allowed, {} unknown, {} for other agents\n",
            count(Status::Satisfied),
            count(Status::Violated),
            count(Status::Allowed),
            count(Status::Unknown),
            count(Status::NotApplicable)
        ));
    }
    out.push_str(&format!(
        "  plan: {} artifact(s), {} MCP server(s), {} workspace write(s)\n",
        report.plan.artifacts.len(),
        report.plan.mcp_servers.len(),
        report.plan.workspace_writes.len()
    ));
    out
}
