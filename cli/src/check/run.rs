//! The check itself: reads the definition, the lock, the slots, the staged record and the
//! inherited places, renders the agent's plan in memory, evaluates the contract and collects the
//! findings into a [`Report`]. Never writes.

use std::path::PathBuf;

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_harness::Agent;
use anyhow::Context as _;

use crate::context::Context;
use crate::env::{self, EnvVars};
use crate::evidence::identity;
use crate::evidence::policy::{Policy, CONTRACT_FILE};
use crate::project::Project;

use agentpack_builders::contract::{self, Requirement};
use finding::{code, Finding, Severity};

use super::requirements::{known, requirement_finding, Facts};
use super::sources::Sources;
use super::{exit_code, Identities, PlanSummary, Report, Request, Stop};
use super::{finding, inherit, inspect, observed, plan};

pub fn preflight(ctx: &Context, mut args: Request<'_>) -> std::result::Result<Report, Stop> {
    let agent = Agent::from_name(&args.agent)
        .ok_or_else(|| Stop::Usage(anyhow::anyhow!("unknown agent `{}`", args.agent)))?;
    let discovered;
    let project = match args.opened.project {
        Some(project) => project,
        None => {
            discovered = Project::discover(ctx).map_err(Stop::Usage)?;
            &discovered
        }
    };
    // One read of the definition and the lock: the read-only session's (the caller's when it has
    // one), which the plan uses too.
    let opened;
    let session = match args.opened.session {
        Some(session) => session,
        None => {
            opened = crate::pipeline::open_read_only(project).map_err(Stop::Operational)?;
            &opened
        }
    };
    let manifest_bytes = session.files().manifest_bytes();
    let lock_bytes = session.files().lock_bytes();
    let manifest = session.manifest();
    let lock = session
        .lock()
        .map_err(|err| Stop::Operational(err.into()))?;
    let mode = crate::pipeline::resolve_mode(ctx, manifest).map_err(Stop::Usage)?;

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

    // The generation checked: the one a strict launch holds its lease on, else the mode's pointer.
    let pointer = ModePointer::new(&project.staging_root, &mode.dir);
    let staged_target = args.generation.clone().or_else(|| pointer.current());
    let home = env::var(EnvVars::HOME).map(PathBuf::from);
    let config_home = env::var(EnvVars::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let cache_dir = project.home.root.join("cache");
    let mut findings = Vec::new();

    findings.extend(inspect::lock_drift(manifest, &lock, &project.root));
    findings.extend(inspect::unverified(
        &lock,
        args.policy,
        env::flag(EnvVars::AGENTPACK_REQUIRE_VERIFIED),
    ));
    // The Plan sync computes, from a read-only session: the cache entries it checked and what
    // it plans for the agent (see `plan`).
    let plan::Effective {
        slots,
        plan: agent_plan,
    } = plan::effective_in(ctx, session, &mode, agent).map_err(Stop::Operational)?;
    findings.extend(inspect::cache(&slots, &cache_dir));
    findings.extend(inspect::staging(
        &pointer,
        staged_target.as_deref(),
        &mode.name,
        &slots,
        &project.workspace,
        &cache_dir,
    ));
    if let Some(staged) = staged_target.as_deref().filter(|target| target.is_dir()) {
        let differences = plan::staged_differences(&agent_plan, staged);
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
    findings.extend(inspect::secrets(manifest, &lock));

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

    let (receipt, unavailable) = match &args.receipt {
        None => (
            None,
            "needs observed evidence, and no probe receipt was given (RECEIPT_MISSING): planned or locked evidence is never promoted to observed",
        ),
        Some(reference) => {
            let mut current = crate::evidence::identity::current_identities(
                project,
                manifest_bytes,
                lock_bytes,
                &mode.name,
                staged_target.as_deref(),
            );
            current.policy = Some(identity::policy_digest(
                args.policy.as_str(),
                ctx.strict_external,
                contract_bytes.as_deref(),
            ));
            let dir = project.state_dir().join(crate::evidence::receipt::DIR);
            let (receipt, receipt_findings) = match args.opened.receipt.take() {
                Some(located) => observed::attach_located(located, &dir, agent.as_str(), &current),
                None => observed::attach(reference, &dir, agent.as_str(), &ctx.cwd, &current),
            };
            findings.extend(receipt_findings);
            (
                receipt,
                "needs observed evidence, and the receipt given is not current (see the RECEIPT_ finding): planned or locked evidence is never promoted to observed",
            )
        }
    };
    let mut requirements = Vec::new();
    if let Some(contract) = &contract {
        let sources = Sources::new(
            &agent_plan.packages,
            agent_plan.overlay.as_ref(),
            &agent_plan.filter,
        );
        let facts = Facts {
            agent,
            plan: &agent_plan,
            lock: &lock,
            inherited: &inherited,
            sources: &sources,
        };
        let lookup = |requirement: &Requirement| known(requirement, &facts);
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
    let staged = staged_target
        .as_deref()
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
            source: identity::source_identity(manifest_bytes, lock_bytes),
            lock: identity::lock_identity(lock_bytes),
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
