//! Codex's probe runs: `debug prompt-input` with [`CODEX_SETTINGS`] and a disposable
//! `HOME`/`CODEX_HOME` holding a regular-file copy of the staged Codex home, outside the checkout
//! (controlled projection), and at the same time the same in the checkout (workspace session,
//! whose winners are the catalog's `other_scopes`) and `--version`. Each run has its own copy of the home, so one never sees what
//! the other wrote.

use std::path::Path;
use std::process::Command;

use agentpack_harness::Agent;
use anyhow::Result;

use super::parse::{self, ParseFailure};
use super::sampling::{self, Job};
use super::{copy_regular, process, Observed, ProbeEnv, CAPTURE_BOUND};

/// The settings every Codex run of a probe passes (`-c`): cloud skills off (only the files the
/// probe placed are listed) and file credential stores (never the user's keyring). Codex 0.171.0
/// parses each of them: it rejects a wrong type or value naming the key.
pub const CODEX_SETTINGS: [&str; 3] = [
    "cloud.skills.enabled=false",
    "cli_auth_credentials_store=\"file\"",
    "mcp_oauth_credentials_store=\"file\"",
];

pub(super) fn observe(setup: &ProbeEnv<'_>) -> Result<Observed> {
    // Two regular-file copies of the staged home: the controlled projection's and the workspace
    // session's (each run may write into its own).
    let staged_home = setup.staged.join(Agent::Codex.profile().staged_root);
    let projection_home = setup.scratch.join("codex-home");
    copy_regular(&staged_home, &projection_home)?;
    let session_home = setup.scratch.join("codex-session-home");
    copy_regular(&staged_home, &session_home)?;
    let in_dir = |cwd: &Path, codex_home: &Path, args: &[&str]| -> Command {
        let mut command = setup.command(cwd);
        command.args(args).env("CODEX_HOME", codex_home);
        command
    };
    // `debug prompt-input` takes the settings itself (`--version` is run bare).
    let mut prompt_input = vec!["debug", "prompt-input"];
    for setting in CODEX_SETTINGS {
        prompt_input.extend(["-c", setting]);
    }
    prompt_input.push("hi");
    // `--version`, the controlled projection and the workspace session (the same in the
    // checkout, so the skills the checkout provides compete with the package's) are independent:
    // they run at once, and the listings count only once the version is one the parser knows.
    let jobs = vec![
        Job::to_end(in_dir(&setup.outside, &projection_home, &["--version"])),
        Job::to_end(in_dir(&setup.outside, &projection_home, &prompt_input)),
        Job::to_end(in_dir(setup.workspace, &session_home, &prompt_input)),
    ];
    let [version_run, mut captured, session]: [process::Captured; 3] =
        sampling::run_all(jobs, setup.timeout, setup.deadline, CAPTURE_BOUND)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("the probe lost a run of Codex"))?;
    let version = parse::version_of(&String::from_utf8_lossy(&version_run.stdout));
    if !version_run.exited_zero() || version_run.cut_short() {
        return Ok(Observed {
            scope: "controlled_projection",
            version,
            captured: version_run,
            parsed: Err(ParseFailure::Malformed(
                "`codex --version` did not exit 0".to_owned(),
            )),
            sampling: None,
        });
    }
    let mut parsed = match &version {
        Some(v) => parse::codex_prompt_input(
            &captured.stdout,
            v,
            &projection_home.join("skills"),
            "controlled_projection",
        ),
        None => Err(ParseFailure::Malformed(
            "`codex --version` printed no version".to_owned(),
        )),
    };
    // The workspace session's winners join `other_scopes`.
    if let (Ok(catalog), Some(v)) = (&mut parsed, &version) {
        captured.append_output(
            "\n== codex debug prompt-input (workspace session)\n",
            &session,
        );
        if !session.exited_zero() || session.termination.truncated {
            captured.termination = session.termination;
        } else {
            match parse::codex_prompt_input(
                &session.stdout,
                v,
                &session_home.join("skills"),
                "workspace_session",
            ) {
                Ok(listed) => catalog.other_scopes = listed.artifacts,
                Err(failure) => parsed = Err(failure),
            }
        }
    }
    Ok(Observed {
        scope: "controlled_projection",
        version,
        captured,
        parsed,
        sampling: None,
    })
}
