//! Claude Code's probe runs: the print-mode `init` event of a session started in the checkout
//! (workspace session) with the staged bundle as `--plugin-dir`, a dummy key and
//! `ANTHROPIC_BASE_URL` at a closed port on 127.0.0.1, stopped as soon as the init event is read;
//! beside it, at the same time, `plugin validate --json` and `plugin details` of the bundle
//! outside the checkout ([`super::details`]; controlled projection: the catalog's `other_scopes`
//! and `properties`). It never makes a model request.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result};

use super::sampling::{self, Job};
use super::{details, parse, process, Observed, ProbeEnv, CAPTURE_BOUND};

pub(super) fn observe(setup: &ProbeEnv<'_>) -> Result<Observed> {
    let bundle = agentpack_harness::launch::command::claude_bundle(setup.staged);
    let mut session = setup.command(setup.workspace);
    session
        .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
        .arg("--plugin-dir")
        .arg(&bundle);
    // The settings a launch passes, so the session is the one a launch starts.
    if let Some(settings) = fs_err::read_to_string(bundle.join("agentpack-settings.json"))
        .ok()
        .as_deref()
        .and_then(agentpack_harness::launch::command::inline_settings)
    {
        session.arg("--settings").arg(settings);
    }
    offline(&mut session)?.env("ANTHROPIC_API_KEY", "sk-ant-agentpack-probe");
    // The controlled projection beside the session, outside the checkout: `plugin validate` and
    // `plugin details` of the bundle. The three are independent, so they run at once; what the
    // projection found counts only when the session's init event parsed.
    let mut validate = setup.command(&setup.outside);
    validate.args(["plugin", "validate", "--json"]).arg(&bundle);
    let mut details_run = setup.command(&setup.outside);
    details_run
        .arg("--plugin-dir")
        .arg(&bundle)
        .args(["plugin", "details", details::BUNDLE]);
    offline(&mut details_run)?;
    let jobs = vec![
        Job {
            command: session,
            stop_when: Some(&init_seen),
        },
        Job::to_end(validate),
        Job::to_end(details_run),
    ];
    let [mut captured, validated, listed]: [process::Captured; 3] =
        sampling::run_all(jobs, setup.timeout, setup.deadline, CAPTURE_BOUND)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("the probe lost a run of Claude Code"))?;
    let mut parsed = parse::claude_init(&captured.stdout);
    let version = first_init(&captured.stdout);
    // The projection's output joins the retained evidence.
    captured.append_output("\n== claude plugin validate --json\n", &validated);
    captured.append_output("\n== claude plugin details\n", &listed);
    if let Ok(catalog) = &mut parsed {
        if validated.cut_short() {
            captured.termination = validated.termination;
        } else {
            match parse::claude_validate(&validated.stdout) {
                Ok(_) if listed.cut_short() => captured.termination = listed.termination,
                Ok(observed) => {
                    match details::observe(observed, &staged_commands(&bundle), &listed) {
                        Ok((other_scopes, property)) => {
                            catalog.other_scopes = other_scopes;
                            catalog.properties.push(property);
                        }
                        Err(failure) => parsed = Err(failure),
                    }
                }
                Err(failure) => parsed = Err(failure),
            }
        }
    }
    Ok(Observed {
        scope: "workspace_session",
        version,
        captured,
        parsed,
        sampling: None,
    })
}

/// The commands the bundle stages (`commands/<name>.md`): the loader lists skills and commands
/// in one line, so these tell them apart when the validator listed nothing.
fn staged_commands(bundle: &std::path::Path) -> BTreeSet<String> {
    let Ok(entries) = fs_err::read_dir(bundle.join("commands")) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.strip_suffix(".md").map(str::to_owned)
        })
        .collect()
}

/// Points `command` at a closed port on 127.0.0.1 and turns off the updater and telemetry: no
/// run of a probe reaches the network.
fn offline(command: &mut std::process::Command) -> Result<&mut std::process::Command> {
    Ok(command
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", closed_port()?),
        )
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1"))
}

/// Whether the stream holds a complete `init` line.
fn init_seen(stdout: &[u8]) -> bool {
    stdout
        .split(|b| *b == b'\n')
        .rev()
        .skip(1) // the last piece has no newline yet
        .any(|line| {
            let marker = b"\"subtype\":\"init\"";
            line.windows(marker.len()).any(|w| w == marker)
        })
}

/// The `claude_code_version` of the first init event, if any.
fn first_init(stdout: &[u8]) -> Option<String> {
    String::from_utf8_lossy(stdout).lines().find_map(|line| {
        let event: serde_json::Value = serde_json::from_str(line).ok()?;
        (event["subtype"] == "init")
            .then(|| event["claude_code_version"].as_str().map(str::to_owned))
            .flatten()
    })
}

/// A port on 127.0.0.1 nothing listens on (bound, read, released).
fn closed_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .context("cannot find a closed port on 127.0.0.1 for the probe")?;
    Ok(listener.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_complete_init_line_counts() {
        let init = br#"{"type":"system","subtype":"init","claude_code_version":"2.1.0"}"#;
        assert!(
            !init_seen(init),
            "no newline yet: the line may be incomplete"
        );
        let mut line = init.to_vec();
        line.push(b'\n');
        assert!(init_seen(&line));
        assert_eq!(first_init(&line).as_deref(), Some("2.1.0"));
        assert_eq!(first_init(b"{\"subtype\":\"other\"}\n"), None);
    }
}
