//! Where the pinned real agent clients are: `AGENTPACK_TEST_AGENTS_BIN`, a `node_modules/.bin` with
//! `claude`, `codex` and `opencode` (`.ci/run` installs them). The conformance, fidelity and probe
//! suites use them as the oracle of what we stage: [`run_pinned`] runs one, [`writable_layer`]
//! gives it a writable config root over a staged tree.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

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

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Claude Code's print-mode stream (`claude -p hi --output-format stream-json --verbose
/// --plugin-dir plugin_dir`) up to and including its `init` event, which lists the skills, slash
/// commands and agents Claude loaded and every `SessionStart` hook's outcome. `ANTHROPIC_BASE_URL`
/// is a closed port on 127.0.0.1 and the key a dummy: nothing leaves the machine, and the process
/// is stopped at the init event. Panics when no init event comes within 90 seconds.
pub fn claude_init_stream(agents: &Path, home: &Path, cwd: &Path, plugin_dir: &Path) -> Vec<Value> {
    let mut child = Command::new(agents.join("claude"))
        .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
        .arg("--plugin-dir")
        .arg(plugin_dir)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("ANTHROPIC_API_KEY", "sk-ant-dummy")
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", closed_port()),
        )
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut events = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = receiver.recv_timeout(left) else {
            break;
        };
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let init = event["subtype"] == "init";
        events.push(event);
        if init {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        events.iter().any(|e| e["subtype"] == "init"),
        "no init event from claude: {events:?}"
    );
    events
}
