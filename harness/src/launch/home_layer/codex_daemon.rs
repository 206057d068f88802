//! The Codex app-server daemon of a generation's `CODEX_HOME`: whether it is still in use, and
//! stopping it once it is not.
//!
//! Codex starts one daemon per canonical `CODEX_HOME` and keeps it running after the terminal
//! session that started it exits (IDE extensions attach to it). A retired generation's home may go
//! only when its daemon has no loaded threads. The daemon answers JSON-RPC over a WebSocket on
//! `<home>/app-server-control/app-server-control.sock`; `thread/loaded/list` names the threads it
//! holds in memory (a thread stays loaded after its client disconnects). Stopping uses Codex's own
//! `codex app-server daemon stop` with `CODEX_HOME` set to the home, preferring the copy of Codex
//! the daemon was installed from (`<home>/packages/app-server-daemon/current/bin/codex`); the
//! daemon's update loop, which runs from that copy, is then signalled (on Linux, only after
//! `/proc` confirms the process runs from inside the home).
//!
//! This module never removes files and never stops a daemon it could not ask: a daemon that does
//! not answer the protocol is reported as [`DaemonUse::Unknown`] and left running.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::Message;

/// Where a Codex daemon of a home listens, relative to the home.
pub const CONTROL_SOCKET: &str = "app-server-control/app-server-control.sock";

/// Codex's managed copy of itself inside a home, which the daemon runs from.
const MANAGED_CODEX: &str = "packages/app-server-daemon/current/bin/codex";

/// The update loop's pid file (JSON with a `pid` field).
const UPDATER_PID_FILE: &str = "app-server-daemon/daemon-updater.pid";

/// How long one question to a daemon may take before it counts as not answering. A daemon answers
/// in milliseconds; this bounds what a hung one adds to a launch.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a home's daemon is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DaemonUse {
    /// No daemon accepts connections on the home's control socket.
    NotRunning,
    /// A daemon answers and has no loaded threads.
    Idle,
    /// A daemon answers and holds these threads in memory.
    Busy { loaded_threads: Vec<String> },
    /// Something accepts connections but did not answer as a Codex daemon (why).
    Unknown(String),
}

/// Failures stopping a daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot stop the Codex daemon of {home}: no Codex executable to run `codex app-server daemon stop` with (install Codex or set CODEX_PATH)")]
    NoCodex { home: PathBuf },
    #[error("cannot run {program} to stop the Codex daemon of {home}: {cause}")]
    Spawn {
        program: PathBuf,
        home: PathBuf,
        cause: std::io::Error,
    },
    #[error("`codex app-server daemon stop` failed for {home} ({status}): {stderr}")]
    StopFailed {
        home: PathBuf,
        status: String,
        stderr: String,
    },
    #[error("the Codex daemon of {home} still answers after `codex app-server daemon stop`")]
    StillRunning { home: PathBuf },
}

/// Asks the daemon of the home at `home` which threads it has loaded.
pub fn probe(home: &Path, timeout: Duration) -> DaemonUse {
    let socket = home.join(CONTROL_SOCKET);
    if std::fs::symlink_metadata(&socket).is_err() {
        return DaemonUse::NotRunning;
    }
    let stream = match UnixStream::connect(&socket) {
        Ok(stream) => stream,
        Err(e) if is_gone(&e) => return DaemonUse::NotRunning,
        Err(e) => {
            return DaemonUse::Unknown(format!("cannot connect to {}: {e}", socket.display()))
        }
    };
    match loaded_threads(stream, timeout) {
        Ok(threads) if threads.is_empty() => DaemonUse::Idle,
        Ok(loaded_threads) => DaemonUse::Busy { loaded_threads },
        Err(why) => DaemonUse::Unknown(why),
    }
}

fn is_gone(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::NotFound
    )
}

/// `initialize`, then `thread/loaded/list` until its cursor runs out.
fn loaded_threads(stream: UnixStream, timeout: Duration) -> Result<Vec<String>, String> {
    let deadline = Instant::now() + timeout;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| format!("cannot set a timeout on the control socket: {e}"))?;
    let (mut socket, _) = tungstenite::client("ws://localhost/", stream)
        .map_err(|e| format!("no WebSocket handshake on the control socket: {e}"))?;
    let mut call = |id: u64, method: &str, params: Value| -> Result<Value, String> {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        socket
            .send(Message::text(request.to_string()))
            .map_err(|e| format!("cannot send {method}: {e}"))?;
        loop {
            if Instant::now() > deadline {
                return Err(format!("no answer to {method} within {timeout:?}"));
            }
            let message = socket
                .read()
                .map_err(|e| format!("no answer to {method}: {e}"))?;
            let Message::Text(text) = message else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            if value.get("id") != Some(&json!(id)) {
                continue; // a notification, or an answer to something else
            }
            if let Some(error) = value.get("error") {
                return Err(format!("{method} failed: {error}"));
            }
            return value
                .get("result")
                .cloned()
                .ok_or_else(|| format!("{method} answered without a result"));
        }
    };
    call(
        1,
        "initialize",
        json!({"clientInfo": {"name": "agentpack", "version": env!("CARGO_PKG_VERSION")}}),
    )?;
    let mut threads = Vec::new();
    let mut cursor = Value::Null;
    for id in 2..1000 {
        let page = call(id, "thread/loaded/list", json!({"cursor": cursor}))?;
        let data = page
            .get("data")
            .and_then(Value::as_array)
            .ok_or("thread/loaded/list answered without `data`")?;
        threads.extend(data.iter().filter_map(Value::as_str).map(str::to_owned));
        cursor = page.get("nextCursor").cloned().unwrap_or(Value::Null);
        if cursor.is_null() {
            break;
        }
    }
    Ok(threads)
}

/// Stops the daemon of `home` with `codex app-server daemon stop`, run by the home's managed copy of
/// Codex when it has one, else by `fallback` (the user's `codex`); waits until the socket no longer
/// answers, then signals the daemon's update loop.
pub fn stop(home: &Path, fallback: Option<&Path>) -> Result<(), DaemonError> {
    let managed = home.join(MANAGED_CODEX);
    let program = if managed.is_file() {
        managed
    } else {
        fallback
            .map(Path::to_path_buf)
            .ok_or_else(|| DaemonError::NoCodex {
                home: home.to_path_buf(),
            })?
    };
    let output = Command::new(&program)
        .args(["app-server", "daemon", "stop"])
        .env(super::codex::ENV_VAR, home)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| DaemonError::Spawn {
            program: program.clone(),
            home: home.to_path_buf(),
            cause: source,
        })?;
    if !output.status.success() {
        return Err(DaemonError::StopFailed {
            home: home.to_path_buf(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    let socket = home.join(CONTROL_SOCKET);
    let deadline = Instant::now() + Duration::from_secs(5);
    while UnixStream::connect(&socket).is_ok() {
        if Instant::now() > deadline {
            return Err(DaemonError::StillRunning {
                home: home.to_path_buf(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stop_update_loop(home);
    Ok(())
}

/// Signals the daemon's update loop when `/proc` shows it runs from inside `home` (elsewhere the
/// pid file alone is not proof enough, and the loop is left alone).
fn stop_update_loop(home: &Path) {
    let Ok(text) = std::fs::read_to_string(home.join(UPDATER_PID_FILE)) else {
        return;
    };
    let Some(pid) = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v.get("pid").and_then(Value::as_i64))
        .and_then(|pid| i32::try_from(pid).ok())
    else {
        return;
    };
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return;
    };
    let canonical_home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    if exe.starts_with(&canonical_home) || exe.starts_with(home) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}
