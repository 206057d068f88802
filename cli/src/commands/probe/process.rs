//! Runs one native client process for a probe: its own process group, a timeout, bounded capture
//! of stdout and stderr, and an early stop once the caller has seen what it needs. On a timeout
//! (or an early stop) the whole group is killed, so a child the client started dies with it. It
//! never reads the user's environment beyond what the caller puts in the command.

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use crate::evidence::receipt::Termination;

/// What one run captured.
#[derive(Debug)]
pub struct Captured {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub termination: Termination,
}

impl Captured {
    /// Appends a later step's output under `header` (one evidence stream for the whole probe).
    pub fn append_output(&mut self, header: &str, step: &Captured) {
        self.stdout.extend_from_slice(header.as_bytes());
        self.stdout.extend_from_slice(&step.stdout);
        self.stderr.extend_from_slice(&step.stderr);
    }

    /// Whether the process ran past its timeout or its output past the capture bound: what it
    /// would have printed is unknown.
    pub fn cut_short(&self) -> bool {
        self.termination.how == "timed_out" || self.termination.truncated
    }

    /// Whether the process exited 0.
    pub fn exited_zero(&self) -> bool {
        self.termination.how == "exited" && self.termination.exit_code == Some(0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot start {program}: {cause}")]
    Spawn {
        program: String,
        cause: std::io::Error,
    },
}

/// Runs `command` in a new process group. `stop_when(stdout_so_far)` returning true stops it early
/// (its group is killed and the run counts as `stopped`).
pub fn run(
    mut command: Command,
    timeout: Duration,
    bound: usize,
    stop_when: &dyn Fn(&[u8]) -> bool,
) -> Result<Captured, ProcessError> {
    let program = command.get_program().to_string_lossy().into_owned();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| ProcessError::Spawn {
        program,
        cause: source,
    })?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let (sender, receiver) = mpsc::channel::<(bool, Vec<u8>)>();
    let mut readers = Vec::new();
    for (is_stdout, stream) in [
        (
            true,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ),
        (
            false,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ),
    ] {
        let Some(mut stream) = stream else { continue };
        let sender = sender.clone();
        readers.push(std::thread::spawn(move || {
            let mut buffer = [0u8; 16 * 1024];
            loop {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if sender.send((is_stdout, buffer[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
        }));
    }
    drop(sender);
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut truncated = false;
    let mut how = None;
    let deadline = started + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(left) {
            Ok((is_stdout, chunk)) => {
                let into = if is_stdout { &mut stdout } else { &mut stderr };
                let room = bound.saturating_sub(into.len());
                if chunk.len() > room {
                    truncated = true;
                }
                into.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if truncated {
                    how = Some("truncated");
                    break;
                }
                if is_stdout && stop_when(&stdout) {
                    how = Some("stopped");
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                how = Some("timed_out");
                break;
            }
            // Both streams closed: the process is ending.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if how.is_some() {
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    }
    // Wait for the process within what is left of the timeout; then kill the group anyway.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                how = Some("timed_out");
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                break child.wait().ok();
            }
            Err(_) => break None,
        }
    };
    // Whatever the client left behind in its group goes too.
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    drop(receiver);
    let exit_code = status.and_then(|s| s.code());
    let how = match how {
        Some(how) => how.to_owned(),
        None if exit_code.is_some() => "exited".to_owned(),
        None => "signaled".to_owned(),
    };
    Ok(Captured {
        stdout,
        stderr,
        termination: Termination {
            how,
            exit_code,
            truncated,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
    })
}
