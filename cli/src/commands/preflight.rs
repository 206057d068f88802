//! `agentpack preflight --agent A`: prints the preflight check ([`crate::check`]) of one agent,
//! as text or `--json`, and exits with its class (0 ready, 2 usage, 3 violated, 4 unknown,
//! 5 operational; returned, never `process::exit`). The check itself lives in `crate::check`,
//! which the strict launch also uses.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::check;
use crate::context::Context;
use crate::evidence::policy::Policy;
use crate::output;

#[derive(Debug, Args)]
pub struct PreflightArgs {
    /// The agent whose effective configuration to check.
    #[arg(long, value_parser = agentpack_harness::agent::NAMES)]
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

pub fn run(ctx: &Context, args: &PreflightArgs) -> Result<ExitCode> {
    let request = check::Request {
        agent: args.agent.clone(),
        policy: args.policy,
        contract: args.contract.clone(),
        receipt: args.receipt.clone(),
        generation: None,
        opened: check::Opened::default(),
    };
    match check::preflight(ctx, request) {
        Ok(report) => {
            let exit = report.exit_code;
            if ctx.json {
                output::json(&report)?;
            } else {
                output::stdout(&check::human(&report))?;
            }
            Ok(ExitCode::from(exit))
        }
        Err(check::Stop::Usage(err)) => {
            output::print_error(&err);
            Ok(ExitCode::from(check::EXIT_USAGE))
        }
        Err(check::Stop::Operational(err)) => {
            output::print_error(&err);
            Ok(ExitCode::from(check::EXIT_OPERATIONAL))
        }
    }
}
