//! Where the pinned real agent clients are: `AGENTPACK_TEST_AGENTS_BIN`, a `node_modules/.bin` with
//! `claude`, `codex` and `opencode` (`.ci/run` installs them). The conformance, fidelity and probe
//! suites use them as the oracle of what we stage: [`run_pinned`] runs one, [`writable_layer`]
//! gives it a writable config root over a staged tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::isolated::IsolatedHome;

/// The directory of the pinned clients, or `None` (the caller skips) when
/// `AGENTPACK_TEST_AGENTS_BIN` is unset or empty. Under `CI` an unset variable is a failure, never
/// a skip; outside CI the skip is printed with the remedy.
pub fn agents_bin() -> Option<PathBuf> {
    match std::env::var_os("AGENTPACK_TEST_AGENTS_BIN").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            crate::skip(
                "AGENTPACK_TEST_AGENTS_BIN is not set to the pinned clients' node_modules/.bin (npm install them, see .ci/run)",
            );
            None
        }
    }
}

/// Runs the pinned client `program` (from `agents`, see [`agents_bin`]) with `args` in `home`'s
/// project, with a clean environment (`PATH`, `HOME` and `envs` only); asserts success and returns
/// stdout followed by stderr.
pub fn run_pinned(
    agents: &Path,
    home: &IsolatedHome,
    program: &str,
    args: &[&str],
    envs: &[(&str, &Path)],
) -> String {
    let mut command = Command::new(agents.join(program));
    command
        .args(args)
        .current_dir(&home.project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home.home);
    for (key, value) in envs {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{text}"
    );
    text
}

/// A writable directory `into` whose entries link to (directories) or copy (files) the read-only
/// staged tree `source`, as a launcher's home layer does: the agents write into their config roots.
pub fn writable_layer(source: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        let target = into.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::os::unix::fs::symlink(entry.path(), target).unwrap();
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Held by a test while the pinned clients it runs have a timeout to meet (`probe` kills a client
/// after 30 s): one such test at a time. Every suite of a crate is one test binary, so without it
/// the probe suites' real-client tests would run side by side on CI's two cores.
pub fn one_timed_client_run() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
