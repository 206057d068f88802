//! Running the agent as a child of the launcher, so the launcher keeps its lease on the generation
//! until the agent exits.
//!
//! While the child runs, the launcher catches SIGINT, SIGQUIT, SIGTERM and SIGHUP instead of dying
//! of them: SIGTERM and SIGHUP are forwarded to the child; SIGINT and SIGQUIT are not, because the
//! terminal already delivers them to the whole foreground process group, agent included (an agent
//! such as Claude Code handles Ctrl-C itself and keeps running). The previous handlers are restored
//! afterwards. The child's exit code is returned, or 128 + the signal that ended it, as a shell does.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;

use super::command::LaunchCommand;

/// A forwardable signal that arrived before the child's pid was known.
static PENDING: AtomicI32 = AtomicI32::new(0);
/// The running child's pid (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Forwards SIGTERM and SIGHUP to the child (or remembers them until it exists); ignores the rest.
/// Only atomics and `kill(2)`, which are async-signal-safe.
extern "C" fn forward(signal: i32) {
    if signal != Signal::SIGTERM as i32 && signal != Signal::SIGHUP as i32 {
        return;
    }
    match CHILD.load(Ordering::SeqCst) {
        0 => PENDING.store(signal, Ordering::SeqCst),
        pid => {
            if let Ok(sig) = Signal::try_from(signal) {
                let _ = signal::kill(Pid::from_raw(pid), sig);
            }
        }
    }
}

const CAUGHT: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGHUP,
];

struct Handlers(Vec<(Signal, SigAction)>);

impl Handlers {
    fn install() -> Self {
        let action = SigAction::new(
            SigHandler::Handler(forward),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut previous = Vec::new();
        for sig in CAUGHT {
            #[expect(unsafe_code)]
            // SAFETY: the handler only touches atomics and calls kill(2), which are
            // async-signal-safe; handlers are reset to the default in the child by exec.
            let old = unsafe { signal::sigaction(sig, &action) };
            if let Ok(old) = old {
                previous.push((sig, old));
            }
        }
        Handlers(previous)
    }
}

impl Drop for Handlers {
    fn drop(&mut self) {
        for (sig, old) in &self.0 {
            #[expect(unsafe_code)]
            // SAFETY: restores the action that was installed before `install`.
            let _ = unsafe { signal::sigaction(*sig, old) };
        }
    }
}

/// Runs `command` in `cwd` with the launcher's environment plus `command.env`, calls `on_spawn`
/// with the child's pid, waits for it while forwarding signals, and returns its exit code.
pub fn run_child(
    command: &LaunchCommand,
    cwd: &Path,
    on_spawn: impl FnOnce(u32),
) -> std::io::Result<i32> {
    let handlers = Handlers::install();
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .envs(&command.env)
        .current_dir(cwd)
        .spawn()?;
    on_spawn(child.id());
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    CHILD.store(pid, Ordering::SeqCst);
    // A signal that came between the spawn and now is delivered late rather than lost.
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if let Ok(sig) = Signal::try_from(pending) {
        let _ = signal::kill(Pid::from_raw(pid), sig);
    }
    // Blocking wait: the handler forwards signals meanwhile, so the launcher adds no polling delay.
    let status = child.wait();
    CHILD.store(0, Ordering::SeqCst);
    let status = status?;
    drop(handlers);
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sh(script: &str) -> LaunchCommand {
        LaunchCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::from([("PROBE".to_string(), "set".into())]),
        }
    }

    #[test]
    fn exit_codes_and_signals_come_back_and_sigterm_is_forwarded() {
        let cwd = std::env::temp_dir();
        let mut seen = 0;
        assert_eq!(
            run_child(&sh("[ \"$PROBE\" = set ] && exit 7"), &cwd, |pid| seen =
                pid)
            .unwrap(),
            7
        );
        assert_ne!(seen, 0);
        assert_eq!(run_child(&sh("kill -KILL $$"), &cwd, |_| {}).unwrap(), 137);
        // The child asks its parent (the launcher) to be terminated; the launcher survives and
        // passes SIGTERM on, which the child turns into exit 42.
        let forwarded = run_child(
            &sh("trap 'exit 42' TERM; kill -TERM $PPID; i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; exit 1"),
            &cwd,
            |_| {},
        )
        .unwrap();
        assert_eq!(forwarded, 42);
    }
}
