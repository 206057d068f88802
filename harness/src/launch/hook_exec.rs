//! The `agentpack hook-exec dispatch` runtime: runs the handlers a staged hook's [`HookSpec`]
//! names, in the staged copy of their package, and answers the agent.
//!
//! Each handler gets the agent's JSON payload on stdin, `CLAUDE_PLUGIN_ROOT`, `CURSOR_PLUGIN_ROOT`
//! and `PLUGIN_ROOT` set to its package's staged copy (also its working directory), and
//! `CLAUDE_PLUGIN_DATA` / `PLUGIN_DATA` set to its data directory (created when missing). A shell
//! form command runs with `/bin/sh -c`; an exec form command (`args` present) runs without a shell.
//!
//! The answer follows the hook contract of Claude Code, Codex and Cursor: exit code 2 blocks (its
//! stderr is the reason), any other exit code is passed on, stdout is passed on. A spec with several
//! handlers (Antigravity, OpenCode) stops at the first that blocks; otherwise their JSON answers are
//! merged. For Antigravity an `"allow"` decision is never passed on: a hook that does not object
//! returns no decision, because Antigravity would approve the tool without asking the user.
//!
//! This module runs processes and reads the spec; it never prints (the binary writes the outcome).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::Agent;
use crate::render::hooks::{HookSpec, HookSpecHandler};

/// How long a handler may run when its spec names no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Failures before any handler ran.
#[derive(Debug, thiserror::Error)]
pub enum HookExecError {
    #[error("cannot read the hook spec {path}: {cause}\n  fix  run `agentpack sync` to stage the hooks again")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the hook spec {path} is not valid: {message}\n  fix  run `agentpack sync` to stage the hooks again")]
    Parse { path: PathBuf, message: String },
    #[error("the hook spec {path} is for {found} {found_event}, but {agent} called it for {event}\n  fix  run `agentpack sync` to stage the hooks again")]
    Mismatch {
        path: PathBuf,
        found: String,
        found_event: String,
        agent: String,
        event: String,
    },
}

/// Reads and checks a spec file against the agent and event the hook was called with.
pub fn load_spec(path: &Path, agent: Agent, event: &str) -> Result<HookSpec, HookExecError> {
    let text = std::fs::read_to_string(path).map_err(|source| HookExecError::Read {
        path: path.to_path_buf(),
        cause: source,
    })?;
    let spec: HookSpec = serde_json::from_str(&text).map_err(|e| HookExecError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if spec.agent != agent.as_str() || spec.event != event {
        return Err(HookExecError::Mismatch {
            path: path.to_path_buf(),
            found: spec.agent,
            found_event: spec.event,
            agent: agent.as_str().into(),
            event: event.into(),
        });
    }
    Ok(spec)
}

/// What to answer the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchOutcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// One handler's result.
#[derive(Debug, Clone, Default)]
struct HandlerRun {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    code: i32,
    failed_to_run: bool,
}

/// The tool a payload is about, for matchers (`tool_name`, `toolName` or `tool`).
fn payload_tool(payload: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(payload).ok()?;
    ["tool_name", "toolName", "tool"]
        .iter()
        .find_map(|key| value.get(*key).and_then(Value::as_str).map(str::to_string))
}

/// Whether a matcher (`*`, empty, `Edit|Write`, `mcp__.*`) selects `tool`.
pub fn matcher_selects(matcher: Option<&str>, tool: Option<&str>) -> bool {
    let Some(matcher) = matcher
        .map(str::trim)
        .filter(|m| !m.is_empty() && *m != "*" && *m != ".*")
    else {
        return true;
    };
    let Some(tool) = tool else {
        return true;
    };
    matcher.split('|').any(|alternative| {
        let alternative =
            alternative.trim_matches(|c| c == '(' || c == ')' || c == '^' || c == '$');
        match alternative.strip_suffix(".*") {
            Some(prefix) => tool.starts_with(prefix),
            None => alternative == tool,
        }
    })
}

fn timeout_of(handler: &HookSpecHandler) -> Duration {
    handler
        .timeout
        .as_ref()
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_TIMEOUT)
}

fn run_handler(handler: &HookSpecHandler, payload: &[u8]) -> HandlerRun {
    let mut command = match &handler.args {
        Some(args) => {
            let mut command = Command::new(&handler.command);
            command.args(args);
            command
        }
        None => {
            let mut command = Command::new("/bin/sh");
            command.arg("-c").arg(&handler.command);
            command
        }
    };
    let root = Path::new(&handler.plugin_root);
    if root.is_dir() {
        command.current_dir(root);
    }
    if !handler.plugin_data.is_empty() {
        let _ = std::fs::create_dir_all(&handler.plugin_data);
    }
    command
        .env("CLAUDE_PLUGIN_ROOT", &handler.plugin_root)
        .env("CURSOR_PLUGIN_ROOT", &handler.plugin_root)
        .env("PLUGIN_ROOT", &handler.plugin_root)
        .env("CLAUDE_PLUGIN_DATA", &handler.plugin_data)
        .env("PLUGIN_DATA", &handler.plugin_data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return HandlerRun {
                stderr: format!(
                    "agentpack: hook of {} ({}) could not start `{}`: {error}\n",
                    handler.module, handler.source, handler.command
                )
                .into_bytes(),
                code: 1,
                failed_to_run: true,
                ..HandlerRun::default()
            }
        }
    };
    let input = payload.to_vec();
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        })
    });
    let readers = [
        child.stdout.take().map(|mut out| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = out.read_to_end(&mut bytes);
                bytes
            })
        }),
        child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = err.read_to_end(&mut bytes);
                bytes
            })
        }),
    ];
    let deadline = Instant::now() + timeout_of(handler);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                timed_out = true;
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    let [out, err] = readers.map(|r| r.and_then(|h| h.join().ok()).unwrap_or_default());
    let mut run = HandlerRun {
        stdout: out,
        stderr: err,
        code: status.and_then(|s| s.code()).unwrap_or(1),
        failed_to_run: timed_out,
    };
    if timed_out {
        run.stderr.extend_from_slice(
            format!(
                "agentpack: hook of {} ({}) timed out after {:?}\n",
                handler.module,
                handler.source,
                timeout_of(handler)
            )
            .as_bytes(),
        );
        run.code = 1;
    }
    run
}

const DECISION_KEYS: [&str; 3] = ["decision", "permissionDecision", "permission"];

/// Removes `"allow"` decisions (at the top and in `hookSpecificOutput`).
fn strip_allow(value: &mut Value) {
    let Some(map) = value.as_object_mut() else {
        return;
    };
    for key in DECISION_KEYS {
        if map
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|d| d.eq_ignore_ascii_case("allow") || d.eq_ignore_ascii_case("approve"))
        {
            map.remove(key);
        }
    }
    if let Some(inner) = map.get_mut("hookSpecificOutput") {
        strip_allow(inner);
    }
}

/// Runs the spec's handlers for `payload` and combines their answers.
pub fn dispatch(agent: Agent, spec: &HookSpec, payload: &[u8]) -> DispatchOutcome {
    let tool = payload_tool(payload);
    let runnable: Vec<&HookSpecHandler> = spec
        .handlers
        .iter()
        .filter(|h| !h.command.is_empty())
        .filter(|h| matcher_selects(h.matcher.as_deref(), tool.as_deref()))
        .collect();
    let mut outcome = DispatchOutcome::default();
    let strips_allow = agent.profile().hooks.strips_allow;
    let single = runnable.len() == 1 && !strips_allow;
    let mut merged: Option<serde_json::Map<String, Value>> = None;
    let mut text = Vec::new();
    for handler in runnable {
        let run = run_handler(handler, payload);
        outcome.stderr.extend_from_slice(&run.stderr);
        let blocked = run.code == 2 || (run.failed_to_run && handler.fail_closed == Some(true));
        if single {
            outcome.stdout = run.stdout;
            outcome.exit_code = if blocked { 2 } else { run.code };
            return outcome;
        }
        if blocked {
            outcome.stdout = run.stdout;
            outcome.exit_code = 2;
            return outcome;
        }
        if run.code != 0 && outcome.exit_code == 0 {
            outcome.exit_code = run.code;
        }
        match serde_json::from_slice::<Value>(&run.stdout) {
            Ok(Value::Object(map)) => {
                let mut value = Value::Object(map);
                if strips_allow {
                    strip_allow(&mut value);
                }
                if let Value::Object(map) = value {
                    merged.get_or_insert_with(serde_json::Map::new).extend(map);
                }
            }
            _ => text.extend_from_slice(&run.stdout),
        }
    }
    outcome.stdout = match merged {
        Some(map) if !map.is_empty() => {
            let mut bytes = serde_json::to_vec(&Value::Object(map)).unwrap_or_default();
            bytes.push(b'\n');
            bytes
        }
        _ if strips_allow => Vec::new(),
        _ => text,
    };
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(command: &str, args: Option<Vec<&str>>, root: &Path) -> HookSpecHandler {
        HookSpecHandler {
            module: "github.com/acme/hooks".into(),
            source: "hooks/hooks.json".into(),
            source_event: "PreToolUse".into(),
            matcher: None,
            plugin_root: root.to_string_lossy().into_owned(),
            plugin_data: root.join("data").to_string_lossy().into_owned(),
            command: command.into(),
            args: args.map(|a| a.into_iter().map(String::from).collect()),
            timeout: None,
            fail_closed: None,
        }
    }

    fn spec(agent: &str, handlers: Vec<HookSpecHandler>) -> HookSpec {
        HookSpec {
            version: 1,
            agent: agent.into(),
            event: "PreToolUse".into(),
            handlers,
        }
    }

    #[test]
    fn a_handler_runs_in_its_package_with_the_payload() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let h = handler(
            "printf '%s|%s|' \"$PWD\" \"$CLAUDE_PLUGIN_ROOT\"; cat; echo oops >&2; exit 3",
            None,
            root,
        );
        let out = dispatch(
            Agent::Claude,
            &spec("claude", vec![h]),
            b"{\"tool_name\":\"Bash\"}",
        );
        let root_text = root.to_string_lossy();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{root_text}|{root_text}|{{\"tool_name\":\"Bash\"}}")
        );
        assert_eq!(out.exit_code, 3);
        assert_eq!(out.stderr, b"oops\n");
        assert!(root.join("data").is_dir());
        let exec = handler("/bin/echo", Some(vec!["a b", "$HOME"]), root);
        let out = dispatch(Agent::Codex, &spec("codex", vec![exec]), b"");
        assert_eq!(out.stdout, b"a b $HOME\n");
    }

    #[test]
    fn antigravity_never_answers_allow_and_a_block_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let allow = handler(
            r#"echo '{"decision":"allow","systemMessage":"ok"}'"#,
            None,
            root,
        );
        let out = dispatch(Agent::Antigravity, &spec("agy", vec![allow.clone()]), b"{}");
        assert_eq!(out.exit_code, 0);
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(answer.get("decision").is_none(), "{answer}");
        assert_eq!(answer["systemMessage"], "ok");
        let block = handler("echo no >&2; exit 2", None, root);
        let out = dispatch(Agent::Antigravity, &spec("agy", vec![allow, block]), b"{}");
        assert_eq!(out.exit_code, 2);
        assert_eq!(out.stderr, b"no\n");
    }

    #[test]
    fn matchers_filter_by_tool() {
        assert!(matcher_selects(Some("Edit|Write"), Some("Write")));
        assert!(!matcher_selects(Some("Edit|Write"), Some("Bash")));
        assert!(matcher_selects(Some("mcp__.*"), Some("mcp__github__x")));
        assert!(matcher_selects(Some("*"), Some("Bash")));
        assert!(matcher_selects(None, None));
    }

    #[test]
    fn a_spec_for_another_event_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("001.json");
        std::fs::write(&path, serde_json::to_vec(&spec("claude", vec![])).unwrap()).unwrap();
        assert!(load_spec(&path, Agent::Claude, "PreToolUse").is_ok());
        let err = load_spec(&path, Agent::Claude, "Stop").unwrap_err();
        assert!(err.to_string().contains("for claude PreToolUse"), "{err}");
        let missing = load_spec(&dir.path().join("x.json"), Agent::Claude, "Stop").unwrap_err();
        assert!(missing.to_string().contains("agentpack sync"), "{missing}");
    }
}
