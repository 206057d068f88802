//! The proxy's JSONL diagnostics: one [`LogRecord`] per request, rendered as one line, appended to
//! one file per proxy run in a 0700 directory, the file 0600.
//!
//! Rendering ([`LogRecord::to_line`]) is pure. Records are built from already sanitized parts
//! (see `sanitize`): this module never sees a credential header or an unredacted body. Writing a
//! line is one `write` on an append-only file, so lines of concurrent requests never interleave.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{Map, Value};

use super::observe::Usage;

/// One request through the proxy.
#[derive(Debug, Default, Clone, Serialize)]
pub struct LogRecord {
    /// When the request arrived (RFC 3339, UTC, milliseconds).
    pub time: String,
    pub method: String,
    /// The request path without its query (queries are not logged).
    pub path: String,
    /// The status sent to Claude (the upstream's, or the proxy's own 502/504).
    pub status: Option<u16>,
    /// From the request's arrival to the end of the response body (a WebSocket: to its close).
    pub latency_ms: u64,
    /// From the request's arrival to the first byte of the response body (headers, when the body
    /// is empty; a WebSocket: to the upgrade).
    pub ttfb_ms: Option<u64>,
    /// The upstream's `request-id` response header.
    pub request_id: Option<String>,
    /// The model sent upstream (after the override).
    pub model: Option<String>,
    /// The model the request named, when the override replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_requested: Option<String>,
    /// The request body's `stream` field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Token usage read from the response.
    pub usage: Option<Usage>,
    /// The API's error type, or the proxy's: `upstream_timeout`, `upstream_unreachable`,
    /// `upstream_body_error`, `client_body_error`, `client_closed`, `bad_request_target`,
    /// `ws_connect_timeout`, `ws_idle_timeout`, `ws_io_error`.
    pub error_type: Option<String>,
    /// What went wrong, for the proxy's own errors (never a body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// `HTTP/1.1` or `HTTP/2`, as spoken to the upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_version: Option<String>,
    /// Request headers without credential headers.
    pub request_headers: Map<String, Value>,
    /// Response headers without credential headers.
    pub response_headers: Map<String, Value>,
    /// Request body bytes received from Claude.
    pub request_bytes: u64,
    /// Response body bytes sent to Claude.
    pub response_bytes: u64,
    /// A WebSocket's byte counts, each way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WebSocketBytes>,
    /// With `AGENTPACK_PROXY_LOG_PAYLOADS`: the start of the request body, redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_body: Option<Snippet>,
    /// With `AGENTPACK_PROXY_LOG_PAYLOADS`: the start of the response body (an upstream error
    /// body, or the first bytes of a message or stream), redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_body: Option<Snippet>,
}

/// Bytes carried by a proxied WebSocket.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct WebSocketBytes {
    pub to_upstream: u64,
    pub from_upstream: u64,
}

/// A truncated, redacted payload.
#[derive(Debug, Clone, Serialize)]
pub struct Snippet {
    pub text: String,
    pub truncated: bool,
}

impl LogRecord {
    /// A record for a request that arrived at `time`.
    pub fn new(time: SystemTime, method: &str, path: &str) -> Self {
        LogRecord {
            time: humantime::format_rfc3339_millis(time).to_string(),
            method: method.to_string(),
            path: path.to_string(),
            ..LogRecord::default()
        }
    }

    /// The JSONL line, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_else(|error| {
            format!(
                "{{\"time\":{:?},\"error_type\":\"log_render_error\",\"error_message\":{:?}}}",
                self.time,
                error.to_string()
            )
        });
        line.push('\n');
        line
    }
}

/// Why the log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot create the proxy log directory {}\n  fix  set AGENTPACK_PROXY_LOG_DIR to a writable directory", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the proxy log {}\n  fix  set AGENTPACK_PROXY_LOG_DIR to a writable directory", file.display())]
    Open {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The append-only log file of one proxy run.
#[derive(Debug)]
pub struct LogWriter {
    path: PathBuf,
    file: Mutex<fs_err::File>,
}

impl LogWriter {
    /// Creates `dir` (0700) and a new file in it named after the start time and the pid (0600).
    pub fn open(dir: &Path, started: SystemTime) -> Result<Self, LogError> {
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        let create_dir = |source| LogError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        };
        crate::private_dir::ensure(dir).map_err(create_dir)?;
        let stamp = humantime::format_rfc3339_seconds(started)
            .to_string()
            .replace([':', '-'], "");
        let path = dir.join(format!("{stamp}-{}.jsonl", std::process::id()));
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| LogError::Open {
                file: path.clone(),
                source,
            })?;
        Ok(LogWriter {
            path,
            file: Mutex::new(file),
        })
    }

    /// The file lines go to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record. A failed write is dropped: diagnostics never break Claude's traffic.
    pub fn write(&self, record: &LogRecord) {
        use std::io::Write as _;
        let line = record.to_line();
        if let Ok(mut file) = self.file.lock() {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_record_is_one_json_line_with_every_documented_field() {
        let mut record = LogRecord::new(
            UNIX_EPOCH + Duration::from_millis(1_764_600_000_123),
            "POST",
            "/v1/messages",
        );
        record.status = Some(200);
        record.latency_ms = 1500;
        record.ttfb_ms = Some(300);
        record.request_id = Some("req_011".into());
        record.model = Some("claude-sonnet-4-5".into());
        record.usage = Some(Usage {
            input_tokens: Some(10),
            output_tokens: Some(20),
            ..Usage::default()
        });
        let line = record.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(
            line,
            "{\"time\":\"2025-12-01T14:40:00.123Z\",\"method\":\"POST\",\"path\":\"/v1/messages\",\"status\":200,\"latency_ms\":1500,\"ttfb_ms\":300,\"request_id\":\"req_011\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":20},\"error_type\":null,\"request_headers\":{},\"response_headers\":{},\"request_bytes\":0,\"response_bytes\":0}\n"
        );
    }

    #[test]
    fn the_log_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("a/proxy-logs");
        let writer = LogWriter::open(&dir, SystemTime::now()).unwrap();
        writer.write(&LogRecord::new(SystemTime::now(), "GET", "/"));
        writer.write(&LogRecord::new(SystemTime::now(), "GET", "/x"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(writer.path()), 0o600);
        let text = std::fs::read_to_string(writer.path()).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(writer.path().extension().is_some_and(|e| e == "jsonl"));
    }
}
