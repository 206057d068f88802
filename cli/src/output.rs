//! What the binary prints: errors on stderr, JSON envelopes on stdout, messages and warnings.
//!
//! Machine-readable output follows the peer automation contract: every JSON read is one object with
//! `schema_version` and `features` injected beside the body's own fields. A refusal is never JSON:
//! stdout stays empty, the reason goes to stderr, and the exit code is non-zero.

#![allow(clippy::print_stdout, clippy::print_stderr)] // this module is where the binary prints

use serde::Serialize;

/// The JSON schema version; bumped only when an existing field changes meaning or shape.
pub const SCHEMA_VERSION: u32 = 1;

/// End-to-end contracts this binary serves. A name appears only when its whole loop works.
pub const FEATURES: &[&str] = &["json-reads-v1"];

/// Prints an error and its causes, the way `main` reports every failure.
pub fn print_error(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  caused by: {cause}");
    }
}

/// Prints a warning line on stderr (shown even with `--quiet`). A message that already carries the
/// label (some library texts do) is not labelled twice, and a warning already printed by this
/// command (`add` resolves, then syncs, and both see the same package) is not printed again.
pub fn warn(message: &str) {
    static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let message = message.strip_prefix("warning: ").unwrap_or(message);
    if let Ok(mut printed) = PRINTED.lock() {
        if printed.iter().any(|seen| seen == message) {
            return;
        }
        printed.push(message.to_owned());
    }
    eprintln!("warning: {message}");
}

/// Prints an informational line on stderr.
pub fn info(message: &str) {
    eprintln!("{message}");
}

/// Prints a progress line on stderr, unless `--quiet` or `--no-progress`.
pub fn progress(ctx: &crate::context::Context, message: &str) {
    if ctx.verbosity == crate::context::Verbosity::Normal {
        eprintln!("{message}");
    }
}

/// Reports elapsed time on stderr for work that takes longer than a second, once a second, until
/// dropped. Silent with `--quiet` or `--no-progress`.
pub struct Ticker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    pub fn start(ctx: &crate::context::Context, label: &str) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let thread = (ctx.verbosity == crate::context::Verbosity::Normal).then(|| {
            let stop = std::sync::Arc::clone(&stop);
            let label = label.to_owned();
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let mut reported = 0;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    let seconds = started.elapsed().as_secs();
                    if seconds > reported && !stop.load(Ordering::SeqCst) {
                        reported = seconds;
                        eprintln!("{label}… {seconds}s");
                    }
                }
            })
        });
        Self { stop, thread }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Stdout was closed by its reader (`agentpack mode list | head -1`): not a failure of the command,
/// so `main` ends quietly and successfully, as other Unix tools do.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed")]
pub struct ClosedStdout;

/// Prints text on stdout, as the answer of a command.
pub fn stdout(text: &str) -> anyhow::Result<()> {
    write_stdout(text.as_bytes())
}

/// Writes bytes on stdout; a closed stdout is [`ClosedStdout`], other failures name stdout.
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ClosedStdout.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to stdout")),
    }
}

/// Wraps a body in the envelope and prints it on stdout.
pub fn json<T: Serialize>(body: &T) -> anyhow::Result<()> {
    let mut value = serde_json::to_value(body)?;
    let object = value
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("internal error: a JSON body must be an object"))?;
    let mut enveloped = serde_json::Map::new();
    enveloped.insert("schema_version".into(), SCHEMA_VERSION.into());
    enveloped.insert("features".into(), FEATURES.to_vec().into());
    enveloped.append(object);
    let mut text = serde_json::to_string_pretty(&enveloped)?;
    text.push('\n');
    write_stdout(text.as_bytes())
}
