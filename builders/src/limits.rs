//! Bounds on everything agentpack downloads or unpacks: timeouts, response sizes, archive sizes,
//! extracted bytes, file counts, compression ratio and tag lists.
//!
//! [`Limits`] holds the values (documented defaults, see `docs/src/limits.md`); the cli builds it
//! from the `AGENTPACK_*` variables it names in one place and hands it to the GitHub and npm clients.
//! [`LimitExceeded`] is the one error a broken bound produces, naming the limit, what crossed it and
//! the variable that raises it. Readers here ([`read_capped`], [`CappedReader`], [`RatioGuard`])
//! stop *before* going past a bound, so nothing grows without end in memory or on disk.
//!
//! This module never reads the environment and never prints.

use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One bound, for messages and for the caller to map to its environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// Time to open a connection.
    ConnectTimeout,
    /// Time one read may wait for bytes.
    ReadTimeout,
    /// Bytes of one downloaded archive or response body.
    DownloadSize,
    /// Bytes of one JSON answer (refs, tags, packuments).
    JsonSize,
    /// Bytes one archive may unpack to.
    ExtractedSize,
    /// Entries one archive may hold.
    Files,
    /// Unpacked bytes per compressed byte.
    CompressionRatio,
    /// Tags one repository may list.
    Tags,
}

impl LimitKind {
    /// Every limit, in documentation order.
    pub const ALL: [LimitKind; 8] = [
        LimitKind::ConnectTimeout,
        LimitKind::ReadTimeout,
        LimitKind::DownloadSize,
        LimitKind::JsonSize,
        LimitKind::ExtractedSize,
        LimitKind::Files,
        LimitKind::CompressionRatio,
        LimitKind::Tags,
    ];

    /// The environment variable that overrides it. The strings live here, once; the cli's list of
    /// variables (`cli/src/env.rs`) names each through this function.
    pub const fn variable(self) -> &'static str {
        match self {
            LimitKind::ConnectTimeout => "AGENTPACK_CONNECT_TIMEOUT",
            LimitKind::ReadTimeout => "AGENTPACK_READ_TIMEOUT",
            LimitKind::DownloadSize => "AGENTPACK_MAX_DOWNLOAD_SIZE",
            LimitKind::JsonSize => "AGENTPACK_MAX_JSON_SIZE",
            LimitKind::ExtractedSize => "AGENTPACK_MAX_EXTRACTED_SIZE",
            LimitKind::Files => "AGENTPACK_MAX_FILES",
            LimitKind::CompressionRatio => "AGENTPACK_MAX_COMPRESSION_RATIO",
            LimitKind::Tags => "AGENTPACK_MAX_TAGS",
        }
    }
}

/// Where one limit's value lives in [`Limits`], by how it is written.
enum Slot<'a> {
    Duration(&'a mut Duration),
    Bytes(&'a mut u64),
    Count(&'a mut u64),
}

/// The bounds of one command. `Default` gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connect timeout of every HTTP client.
    pub connect_timeout: Duration,
    /// How long one read of a response may wait for bytes (a stalled server fails after this).
    pub read_timeout: Duration,
    /// Bytes of one downloaded archive (GitHub tarball, npm tarball, git pack).
    pub max_download_bytes: u64,
    /// Bytes of one JSON answer (a commit lookup, a page of tags, an npm packument).
    pub max_json_bytes: u64,
    /// Bytes one archive may unpack to.
    pub max_extracted_bytes: u64,
    /// Entries (files, links, directories) one archive may unpack to.
    pub max_files: u64,
    /// Unpacked bytes per compressed byte, checked once more than [`RATIO_FLOOR`] bytes are unpacked.
    pub max_compression_ratio: u64,
    /// Tags one repository may list (every page counted).
    pub max_tags: u64,
}

/// Unpacked bytes below which the compression ratio is not checked (small files compress well).
pub const RATIO_FLOOR: u64 = 1 << 20;

const MIB: u64 = 1 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connect_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(60),
            max_download_bytes: 1024 * MIB,
            max_json_bytes: 64 * MIB,
            max_extracted_bytes: 4096 * MIB,
            max_files: 100_000,
            max_compression_ratio: 100,
            max_tags: 20_000,
        }
    }
}

/// A value of a limit variable that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?} is not {expected}\n  fix       {example}, or unset it for the default ({default})")]
pub struct InvalidLimit {
    /// The variable.
    pub variable: String,
    /// Its value.
    pub value: String,
    /// What it must be.
    pub expected: &'static str,
    /// An example.
    pub example: &'static str,
    /// The default.
    pub default: String,
}

impl Limits {
    /// The limits with every value `lookup` gives (by [`LimitKind`]; `None` keeps the default).
    /// Durations are seconds (`30`, `0.5`) or with a unit (`500ms`, `2m`); sizes are bytes or with
    /// a unit (`64K`, `512M`, `1G`, binary); counts are plain numbers. Zero is refused.
    pub fn with_overrides(
        mut lookup: impl FnMut(LimitKind) -> Option<String>,
    ) -> Result<Limits, InvalidLimit> {
        let mut limits = Limits::default();
        for kind in LimitKind::ALL {
            let Some(raw) = lookup(kind) else { continue };
            let value = raw.trim();
            if value.is_empty() {
                continue;
            }
            let set = match limits.slot(kind) {
                Slot::Duration(slot) => parse_duration(value)
                    .filter(|d| !d.is_zero())
                    .map(|d| *slot = d)
                    .ok_or((
                        "a positive duration",
                        "write seconds (30, 0.5) or 500ms / 2m",
                    )),
                Slot::Bytes(slot) => parse_size(value)
                    .filter(|b| *b > 0)
                    .map(|b| *slot = b)
                    .ok_or(("a positive size", "write bytes or 64K / 512M / 1G")),
                Slot::Count(slot) => value
                    .replace('_', "")
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .map(|n| *slot = n)
                    .ok_or(("a positive whole number", "write e.g. 1000")),
            };
            set.map_err(|(expected, example)| InvalidLimit {
                variable: kind.variable().to_owned(),
                value: raw.clone(),
                expected,
                example,
                default: limits_default_text(kind),
            })?;
        }
        Ok(limits)
    }

    fn slot(&mut self, kind: LimitKind) -> Slot<'_> {
        match kind {
            LimitKind::ConnectTimeout => Slot::Duration(&mut self.connect_timeout),
            LimitKind::ReadTimeout => Slot::Duration(&mut self.read_timeout),
            LimitKind::DownloadSize => Slot::Bytes(&mut self.max_download_bytes),
            LimitKind::JsonSize => Slot::Bytes(&mut self.max_json_bytes),
            LimitKind::ExtractedSize => Slot::Bytes(&mut self.max_extracted_bytes),
            LimitKind::Files => Slot::Count(&mut self.max_files),
            LimitKind::CompressionRatio => Slot::Count(&mut self.max_compression_ratio),
            LimitKind::Tags => Slot::Count(&mut self.max_tags),
        }
    }

    /// The value of one limit as text (`30s`, `64 MiB`, `100000`), for messages and docs.
    pub fn describe(&self, kind: LimitKind) -> String {
        match kind {
            LimitKind::ConnectTimeout => format_duration(self.connect_timeout),
            LimitKind::ReadTimeout => format_duration(self.read_timeout),
            LimitKind::DownloadSize => format_size(self.max_download_bytes),
            LimitKind::JsonSize => format_size(self.max_json_bytes),
            LimitKind::ExtractedSize => format_size(self.max_extracted_bytes),
            LimitKind::Files => self.max_files.to_string(),
            LimitKind::CompressionRatio => format!("{}:1", self.max_compression_ratio),
            LimitKind::Tags => self.max_tags.to_string(),
        }
    }
}

fn limits_default_text(kind: LimitKind) -> String {
    Limits::default().describe(kind)
}

/// `30`, `0.5`, `30s`, `500ms`, `2m`.
fn parse_duration(text: &str) -> Option<Duration> {
    if let Ok(seconds) = text.parse::<f64>() {
        return (seconds.is_finite() && seconds > 0.0 && seconds < 1e9)
            .then(|| Duration::from_secs_f64(seconds));
    }
    let (number, unit) = split_unit(text);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" | "min" => value * 60.0,
        _ => return None,
    };
    (seconds.is_finite() && seconds > 0.0 && seconds < 1e9)
        .then(|| Duration::from_secs_f64(seconds))
}

/// `1048576`, `64K`, `64KiB`, `512M`, `1G` (binary units).
fn parse_size(text: &str) -> Option<u64> {
    let (number, unit) = split_unit(text);
    let value: u64 = number.replace('_', "").parse().ok()?;
    let factor: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => return None,
    };
    value.checked_mul(factor)
}

fn split_unit(text: &str) -> (&str, &str) {
    let at = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    (text[..at].trim(), text[at..].trim())
}

/// `30s`, `500ms`.
pub fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// `64 MiB`, `1 GiB`, `1500 bytes`.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= factor && bytes % factor == 0 {
            return format!("{} {unit}", bytes / factor);
        }
    }
    format!("{bytes} bytes")
}

/// A bound was crossed: what was being read, which limit, its value and the variable to raise it.
/// Small (the details are boxed), so the errors that carry it stay small.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {}; the limit is {} ({})\n  fix       if this is expected, raise {}; otherwise the source is broken or hostile", .detail.what, .detail.crossed, .detail.limit, .kind.variable(), .kind.variable())]
pub struct LimitExceeded {
    /// Which limit.
    pub kind: LimitKind,
    detail: Box<LimitDetail>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LimitDetail {
    what: String,
    crossed: String,
    limit: String,
}

impl LimitExceeded {
    /// A crossing of `kind` by `what` (`the download of https://…`), which `crossed` it
    /// (`is larger than 1 GiB`).
    pub fn new(
        limits: &Limits,
        kind: LimitKind,
        what: impl Into<String>,
        crossed: impl Into<String>,
    ) -> Self {
        LimitExceeded {
            kind,
            detail: Box::new(LimitDetail {
                what: what.into(),
                crossed: crossed.into(),
                limit: limits.describe(kind),
            }),
        }
    }

    /// A crossing of the size limit `kind` by `what`, which "is larger than" the limit.
    pub fn too_large(limits: &Limits, kind: LimitKind, what: impl Into<String>) -> Self {
        LimitExceeded::new(
            limits,
            kind,
            what,
            format!("is larger than {}", limits.describe(kind)),
        )
    }

    /// The variable that raises the limit.
    pub fn variable(&self) -> &'static str {
        self.kind.variable()
    }

    /// As an `io::Error` (for readers), recoverable with [`LimitExceeded::find`].
    pub fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    /// The crossing carried by an `io::Error` (or one of its sources), if any.
    pub fn find(error: &io::Error) -> Option<&LimitExceeded> {
        let mut inner: Option<&(dyn std::error::Error + 'static)> = error.get_ref().map(|e| e as _);
        while let Some(current) = inner {
            if let Some(found) = current.downcast_ref::<LimitExceeded>() {
                return Some(found);
            }
            if let Some(io) = current.downcast_ref::<io::Error>() {
                if let Some(found) = io.get_ref().and_then(|e| e.downcast_ref::<LimitExceeded>()) {
                    return Some(found);
                }
            }
            inner = current.source();
        }
        None
    }

    /// Was `error` (or one of its causes) a read that waited longer than the read timeout?
    pub fn is_timeout(error: &io::Error) -> bool {
        let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(cause) = current {
            if cause
                .downcast_ref::<io::Error>()
                .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
            {
                return true;
            }
            let text = cause.to_string().to_ascii_lowercase();
            if text.contains("timed out") || text.contains("timeout") {
                return true;
            }
            current = cause.source();
        }
        false
    }
}

/// A reader that fails with a [`LimitExceeded`] instead of returning byte `max + 1`.
#[derive(Debug)]
pub struct CappedReader<R> {
    inner: R,
    read: u64,
    max: u64,
    error: Option<LimitExceeded>,
}

impl<R: Read> CappedReader<R> {
    /// At most `max` bytes of `inner`; the error to give when more follow.
    pub fn new(inner: R, max: u64, error: LimitExceeded) -> Self {
        CappedReader {
            inner,
            read: 0,
            max,
            error: Some(error),
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Allow one byte past the cap to find out whether more follow.
        let room = (self.max + 1).saturating_sub(self.read);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.read += n as u64;
        if self.read > self.max {
            let error = self.error.clone().unwrap_or_else(|| {
                let limits = Limits {
                    max_download_bytes: self.max,
                    ..Limits::default()
                };
                LimitExceeded::new(&limits, LimitKind::DownloadSize, "a stream", "is too large")
            });
            return Err(error.into_io());
        }
        Ok(n)
    }
}

/// Reads all of `reader` into memory, failing with `error` past `max` bytes.
pub fn read_capped(reader: impl Read, max: u64, error: LimitExceeded) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    CappedReader::new(reader, max, error).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Counts the bytes a reader gives, into a shared counter (the compressed side of a [`RatioGuard`]).
#[derive(Debug)]
pub struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> CountingReader<R> {
    /// Counts `inner`'s bytes into the returned counter.
    pub fn new(inner: R) -> (Self, Arc<AtomicU64>) {
        let count = Arc::new(AtomicU64::new(0));
        (
            CountingReader {
                inner,
                count: Arc::clone(&count),
            },
            count,
        )
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The decompressed side of an archive: fails once it gave more than `ratio` bytes per compressed
/// byte (past [`RATIO_FLOOR`]) or more than the extracted-size limit plus tar overhead.
#[derive(Debug)]
pub struct RatioGuard<R> {
    inner: R,
    compressed: Arc<AtomicU64>,
    produced: u64,
    limits: Limits,
    what: String,
}

impl<R: Read> RatioGuard<R> {
    /// Guards `inner` (a decoder) whose input is counted in `compressed`.
    pub fn new(
        inner: R,
        compressed: Arc<AtomicU64>,
        limits: Limits,
        what: impl Into<String>,
    ) -> Self {
        RatioGuard {
            inner,
            compressed,
            produced: 0,
            limits,
            what: what.into(),
        }
    }
}

impl<R: Read> Read for RatioGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.produced += n as u64;
        if self.produced > RATIO_FLOOR {
            let compressed = self.compressed.load(Ordering::Relaxed).max(1);
            if self.produced / compressed > self.limits.max_compression_ratio {
                return Err(LimitExceeded::new(
                    &self.limits,
                    LimitKind::CompressionRatio,
                    self.what.clone(),
                    format!(
                        "unpacks {} from {} (a compression ratio above the limit: a decompression bomb?)",
                        format_size_loose(self.produced),
                        format_size_loose(compressed)
                    ),
                )
                .into_io());
            }
        }
        Ok(n)
    }
}

/// `12.3 MiB`-style text for a byte count that is not a round number.
pub fn format_size_loose(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let value = bytes as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", value / f64::from(1u32 << 30))
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", value / f64::from(1u32 << 20))
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", value / 1024.0)
    } else {
        format!("{bytes} bytes")
    }
}

/// `a, b, c … and 80 more`: at most `shown` names of a long list, for messages.
pub fn truncate_list<S: AsRef<str>>(items: &[S], shown: usize) -> String {
    let mut text = items
        .iter()
        .take(shown)
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > shown {
        text.push_str(&format!(" … and {} more", items.len() - shown));
    }
    text
}

/// How many names a message lists before "… and N more".
pub const LISTED_IN_MESSAGES: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_parse_units_and_refuse_nonsense() {
        let limits = Limits::with_overrides(|kind| match kind {
            LimitKind::ReadTimeout => Some("500ms".into()),
            LimitKind::ConnectTimeout => Some("2".into()),
            LimitKind::DownloadSize => Some("64K".into()),
            LimitKind::Files => Some("1_000".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(limits.read_timeout, Duration::from_millis(500));
        assert_eq!(limits.connect_timeout, Duration::from_secs(2));
        assert_eq!(limits.max_download_bytes, 64 * 1024);
        assert_eq!(limits.max_files, 1000);
        assert_eq!(limits.max_json_bytes, Limits::default().max_json_bytes);
        let error =
            Limits::with_overrides(|kind| (kind == LimitKind::JsonSize).then(|| "lots".to_owned()))
                .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("AGENTPACK_MAX_JSON_SIZE=\"lots\""),
            "{error}"
        );
        assert!(Limits::with_overrides(|k| (k == LimitKind::Files).then(|| "0".into())).is_err());
    }

    #[test]
    fn capped_reader_stops_at_the_cap() {
        let limits = Limits::default();
        let error = LimitExceeded::new(&limits, LimitKind::JsonSize, "x", "is too large");
        assert_eq!(
            read_capped(&b"12345"[..], 5, error.clone()).unwrap(),
            b"12345"
        );
        let failure = read_capped(&b"123456"[..], 5, error).unwrap_err();
        let found = LimitExceeded::find(&failure).unwrap();
        assert_eq!(found.kind, LimitKind::JsonSize);
    }

    #[test]
    fn long_lists_are_truncated() {
        let names: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
        let text = truncate_list(&names, 20);
        assert!(
            text.starts_with("v0, v1,") && text.ends_with("v19 … and 80 more"),
            "{text}"
        );
        assert_eq!(truncate_list(&["a", "b"], 20), "a, b");
    }
}
