//! `agentpack probe --all` and `agentpack sync --probe`: probes every installed supported agent
//! (claude, codex, opencode, found like the launchers find them) in parallel, one thread each
//! (every client already runs in its own process group with its own timeout), and renders one
//! table. Each probe writes its receipt exactly as `probe --agent` does; this module never stages
//! and never decides what a receipt satisfies.

use std::path::PathBuf;
use std::process::ExitCode;

use agentpack_harness::launch::command::LaunchError;
use agentpack_harness::Agent;
use anyhow::Result;
use serde::Serialize;

use super::Probe;
use crate::context::Context;
use crate::evidence::policy::Policy;
use crate::output;

/// What probing one agent gave.
#[derive(Debug, Serialize)]
pub struct Probed {
    pub agent: String,
    /// `complete`, `unknown`, `failed`, `timed_out`, or `error` (nothing could be run: the reason
    /// is in `reason`).
    pub status: String,
    pub version: Option<String>,
    /// Artifacts of the staged tree the probe expected (skills, commands and agents the staged
    /// tree holds for that agent) and how many of them the client listed as the winner.
    pub expected: Option<usize>,
    pub observed: Option<usize>,
    /// Hooks whose outcome was not `success`.
    pub hook_failures: usize,
    pub reason: Option<String>,
    pub receipt: Option<PathBuf>,
    pub elapsed_ms: u64,
}

/// The supported agents whose client is installed; a `*_PATH` override that points at no
/// executable is kept (its probe reports the error), a client missing from `PATH` is left out.
pub fn installed() -> Vec<Agent> {
    super::PROBED
        .into_iter()
        .filter(|agent| {
            !matches!(
                crate::env::agent_binary(*agent),
                Err(LaunchError::NotInstalled { .. })
            )
        })
        .collect()
}

/// Probes every installed supported agent in parallel; the rows in `claude, codex, opencode`
/// order. An error only when no supported agent is installed.
pub fn probe_all(ctx: &Context, policy: Option<Policy>) -> Result<Vec<Probed>> {
    let agents = installed();
    if agents.is_empty() {
        anyhow::bail!(
            "no supported agent is installed: none of `claude`, `codex`, `opencode` is on PATH\n  fix  install one, or set CLAUDE_PATH, CODEX_PATH or OPENCODE_PATH to its executable"
        );
    }
    let rows = std::thread::scope(|scope| {
        let handles: Vec<_> = agents
            .iter()
            .map(|agent| {
                let agent = *agent;
                scope.spawn(move || {
                    let started = std::time::Instant::now();
                    let outcome = super::probe_agent(ctx, agent, policy);
                    row(agent, outcome, started.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(&agents)
            .map(|(handle, agent)| {
                handle.join().unwrap_or_else(|_| {
                    Probed::error(*agent, "the probe's thread panicked".to_owned(), 0)
                })
            })
            .collect()
    });
    Ok(rows)
}

impl Probed {
    /// The row of a probe that could not run (`reason` says why).
    fn error(agent: Agent, reason: String, elapsed_ms: u64) -> Self {
        Probed {
            agent: agent.as_str().to_owned(),
            status: "error".to_owned(),
            version: None,
            expected: None,
            observed: None,
            hook_failures: 0,
            reason: Some(reason),
            receipt: None,
            elapsed_ms,
        }
    }
}

fn row(agent: Agent, outcome: Result<Probe>, elapsed: std::time::Duration) -> Probed {
    let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    match outcome {
        Err(error) => Probed::error(agent, format!("{error:#}"), elapsed_ms),
        Ok(Probe {
            receipt,
            path,
            expected,
        }) => {
            let catalog = receipt.catalog.as_ref();
            Probed {
                agent: receipt.agent.clone(),
                status: receipt.status.clone(),
                version: receipt.client.version.clone(),
                expected: catalog.map(|_| expected.len()),
                observed: catalog.map(|c| {
                    expected
                        .iter()
                        .filter(|(category, name)| {
                            c.artifacts.iter().any(|a| {
                                a.winner == "package" && &a.category == category && &a.name == name
                            })
                        })
                        .count()
                }),
                hook_failures: catalog.map_or(0, |c| {
                    c.hooks.iter().filter(|h| h.outcome != "success").count()
                }),
                reason: receipt.reason.clone(),
                receipt: Some(path),
                elapsed_ms,
            }
        }
    }
}

/// The exit code of a `probe --all`: 0 when every probe is complete, 5 when any failed, timed
/// out or could not run, else 4 (a client version no parser was validated on).
pub fn exit_code(rows: &[Probed]) -> ExitCode {
    ExitCode::from(exit_status(rows))
}

pub(crate) fn exit_status(rows: &[Probed]) -> u8 {
    if rows.iter().all(|r| r.status == "complete") {
        0
    } else if rows
        .iter()
        .any(|r| r.status != "complete" && r.status != "unknown")
    {
        5
    } else {
        4
    }
}

/// The table `probe --all` prints.
pub fn table(rows: &[Probed]) -> String {
    let mut lines = vec![[
        "agent".to_owned(),
        "version".to_owned(),
        "status".to_owned(),
        "expected".to_owned(),
        "observed".to_owned(),
        "hook failures".to_owned(),
    ]];
    let count = |n: Option<usize>| n.map_or("-".to_owned(), |n| n.to_string());
    for r in rows {
        lines.push([
            r.agent.clone(),
            r.version.clone().unwrap_or_else(|| "-".to_owned()),
            r.status.clone(),
            count(r.expected),
            count(r.observed),
            r.hook_failures.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for r in rows {
        if let Some(reason) = &r.reason {
            out.push_str(&format!(
                "{}: {}\n",
                r.agent,
                reason.lines().next().unwrap_or_default()
            ));
        }
        if let Some(path) = &r.receipt {
            out.push_str(&format!("{}: receipt {}\n", r.agent, path.display()));
        }
    }
    out
}

/// Prints the rows: the table, or `{"probes": [...]}` in the JSON envelope.
pub fn print(ctx: &Context, rows: &[Probed]) -> Result<()> {
    if ctx.json {
        output::json(&serde_json::json!({ "probes": rows }))
    } else {
        output::stdout(&table(rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probed(agent: &str, status: &str) -> Probed {
        Probed {
            agent: agent.to_owned(),
            status: status.to_owned(),
            version: Some("1.2.3".to_owned()),
            expected: Some(3),
            observed: Some(2),
            hook_failures: 1,
            reason: None,
            receipt: None,
            elapsed_ms: 0,
        }
    }

    #[test]
    fn the_table_and_the_exit_status_follow_the_worst_probe() {
        let rows = vec![probed("claude", "complete"), probed("opencode", "unknown")];
        let table = table(&rows);
        let mut lines = table.lines();
        assert_eq!(
            lines.next(),
            Some("agent     version  status    expected  observed  hook failures")
        );
        assert_eq!(
            lines.next(),
            Some("claude    1.2.3    complete  3         2         1")
        );
        assert_eq!(exit_status(&rows), 4);
        assert_eq!(exit_status(&rows[..1]), 0);
        assert_eq!(
            exit_status(&[probed("codex", "timed_out"), probed("x", "unknown")]),
            5
        );
    }
}
