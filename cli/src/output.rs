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
/// A URL's userinfo is printed as `***` here and in [`warn`]: no credential in any message.
pub fn print_error(err: &anyhow::Error) {
    let redact = |text: String| agentpack_harness::render::credentials::redact_url_userinfo(&text);
    for (index, line) in error_lines(err).into_iter().enumerate() {
        let label = if index == 0 { "error:" } else { "  caused by:" };
        eprintln!("{label} {}", redact(line));
    }
}

/// The lines [`print_error`] prints: the error, then each cause that says something new. A cause
/// whose text the line above already holds (an error that repeats its source in its own message, as
/// `"cannot read {path}: {source}"` or `#[error("{0}")]` do) is not printed again, so each cause
/// appears once.
pub fn error_lines(err: &anyhow::Error) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if lines
            .last()
            .is_some_and(|above| above.contains(text.trim()))
        {
            continue;
        }
        lines.push(text);
    }
    lines
}

/// Prints a warning line on stderr (shown even with `--quiet`). A message that already carries the
/// label (some library texts do) is not labelled twice. Nothing is de-duplicated here: a command
/// resolves once and the pipeline's steps return each warning once (`agentpack_builders::project`),
/// so a warning printed twice is a bug to fix where it comes from.
pub fn warn(message: &str) {
    let message = agentpack_harness::render::credentials::redact_url_userinfo(message);
    let message = message.strip_prefix("warning: ").unwrap_or(&message);
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

/// A spinner with the elapsed time on stderr for work that takes longer than a second, until dropped.
///
/// Shown only on a terminal and at normal verbosity (not with `--quiet`, `--no-progress` or
/// `AGENTPACK_NO_PROGRESS`): a pipe or a log file never gets progress lines. Work that ends within the
/// second (a no-op sync) never draws anything, and dropping the ticker wakes its thread at once, so
/// the cost on a hot path is one thread start and one join, no sleep.
pub struct Ticker {
    shown: Option<(std::sync::Arc<TickerStop>, std::thread::JoinHandle<()>)>,
}

/// The flag a ticker's thread waits on: set when the work is done.
#[derive(Default)]
struct TickerStop {
    done: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl TickerStop {
    /// Waits up to `timeout`; true when the work is done.
    fn wait(&self, timeout: std::time::Duration) -> bool {
        let Ok(done) = self.done.lock() else {
            return true;
        };
        match self.wake.wait_timeout_while(done, timeout, |done| !*done) {
            Ok((done, _)) => *done,
            Err(_) => true,
        }
    }

    fn finish(&self) {
        if let Ok(mut done) = self.done.lock() {
            *done = true;
        }
        self.wake.notify_all();
    }
}

impl Ticker {
    /// How long work runs before the spinner appears.
    const DELAY: std::time::Duration = std::time::Duration::from_secs(1);
    /// How often the spinner redraws.
    const REDRAW: std::time::Duration = std::time::Duration::from_millis(120);

    pub fn start(ctx: &crate::context::Context, label: &str) -> Self {
        Self::start_with_status(ctx, label, None)
    }

    /// [`Ticker::start`], the label followed by what `status` says at each redraw (bytes moved).
    pub fn start_with_status(
        ctx: &crate::context::Context,
        label: &str,
        status: Option<Box<dyn Fn() -> String + Send>>,
    ) -> Self {
        use std::io::IsTerminal as _;
        if ctx.verbosity != crate::context::Verbosity::Normal || !std::io::stderr().is_terminal() {
            return Self { shown: None };
        }
        let stop = std::sync::Arc::new(TickerStop::default());
        let waiter = std::sync::Arc::clone(&stop);
        let label = label.to_owned();
        let thread = std::thread::spawn(move || {
            if waiter.wait(Self::DELAY) {
                return;
            }
            let spinner = indicatif::ProgressBar::new_spinner();
            spinner.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {msg}… {elapsed}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            let message = |status: &Option<Box<dyn Fn() -> String + Send>>| match status {
                Some(status) => format!("{label} ({})", status()),
                None => label.clone(),
            };
            spinner.set_message(message(&status));
            while !waiter.wait(Self::REDRAW) {
                if status.is_some() {
                    spinner.set_message(message(&status));
                }
                spinner.tick();
            }
            spinner.finish_and_clear();
        });
        Self {
            shown: Some((stop, thread)),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.shown.take() {
            stop.finish();
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

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::TickerStop;
    use std::time::{Duration, Instant};

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read /p/pack.lock: {source}")]
    struct Repeats {
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_printed_once() {
        let leaf = std::io::Error::from_raw_os_error(20);
        let err = anyhow::Error::new(Repeats { source: leaf }).context("cannot load the project");
        assert_eq!(
            super::error_lines(&err),
            [
                "cannot load the project",
                "cannot read /p/pack.lock: Not a directory (os error 20)"
            ]
        );
        let chained = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::error_lines(&chained), ["outer", "inner"]);
    }

    #[test]
    fn a_finished_ticker_wakes_its_waiter_at_once() {
        let stop = std::sync::Arc::new(TickerStop::default());
        let waiter = std::sync::Arc::clone(&stop);
        let started = Instant::now();
        let thread = std::thread::spawn(move || waiter.wait(Duration::from_secs(30)));
        stop.finish();
        assert!(thread.join().unwrap(), "the waiter saw the work done");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_unfinished_ticker_times_out() {
        let stop = TickerStop::default();
        assert!(!stop.wait(Duration::from_millis(10)));
    }
}
