//! Reading what the log reports out of the traffic: the request's `model` and `stream` fields
//! (and the model override), and from the response the token usage and the error type, whether
//! the body is one JSON document or a server-sent event stream.
//!
//! Pure and incremental: [`ResponseObserver::feed`] sees each chunk as it passes and keeps only
//! what it needs (the current SSE line, or the JSON body up to a cap). It never changes the bytes
//! that are forwarded and never blocks.

use serde::Deserialize;
use serde_json::{Map, Value};

/// Most bytes of a non-streamed response body kept to read its usage and error type.
const JSON_OBSERVE_CAP: usize = 8 * 1024 * 1024;
/// Longest SSE line kept (longer lines are skipped; usage events are short).
const SSE_LINE_CAP: usize = 1024 * 1024;

/// The fields of a request body the log reports.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RequestFacts {
    pub model: Option<String>,
    pub stream: Option<bool>,
}

#[derive(Deserialize)]
struct RequestProbe {
    model: Option<Value>,
    stream: Option<Value>,
}

/// Reads `model` and `stream` from a JSON request body (anything else: no facts).
pub fn request_facts(body: &[u8]) -> RequestFacts {
    let Ok(probe) = serde_json::from_slice::<RequestProbe>(body) else {
        return RequestFacts::default();
    };
    RequestFacts {
        model: probe.model.and_then(|m| m.as_str().map(str::to_string)),
        stream: probe.stream.and_then(|s| s.as_bool()),
    }
}

/// The body with its top-level `model` field set to `model`, when it is a JSON object that has a
/// string `model` different from it; `None` leaves the body as it is.
pub fn override_model(body: &[u8], model: &str) -> Option<Vec<u8>> {
    let facts = request_facts(body);
    if facts
        .model
        .as_deref()
        .is_none_or(|current| current == model)
    {
        return None;
    }
    let mut object: Map<String, Value> = serde_json::from_slice(body).ok()?;
    object.insert("model".to_string(), Value::String(model.to_string()));
    serde_json::to_vec(&object).ok()
}

/// Token counts as the API reports them (any field may be absent).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
}

impl Usage {
    /// Takes each count present in `value` (a `usage` object), keeping the others.
    fn merge(&mut self, value: &Value) {
        let get = |name: &str| value.get(name).and_then(Value::as_u64);
        for (slot, name) in [
            (&mut self.input_tokens, "input_tokens"),
            (&mut self.output_tokens, "output_tokens"),
            (
                &mut self.cache_creation_input_tokens,
                "cache_creation_input_tokens",
            ),
            (&mut self.cache_read_input_tokens, "cache_read_input_tokens"),
        ] {
            if let Some(n) = get(name) {
                *slot = Some(n);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

/// What the observer learned from a response body.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResponseFacts {
    pub usage: Usage,
    /// The API's error type (`overloaded_error`, …) from an error body or an SSE `error` event.
    pub error_type: Option<String>,
    /// The model the response names.
    pub model: Option<String>,
    /// SSE events seen (0 for a JSON body).
    pub events: u64,
}

/// How the body is read.
#[derive(Debug)]
enum Kind {
    /// `text/event-stream`: line by line.
    Sse {
        line: Vec<u8>,
        skipping: bool,
        event: Option<String>,
    },
    /// Anything else: kept up to the cap, parsed as JSON at the end.
    Json {
        body: Vec<u8>,
        overflow: bool,
        gzip: bool,
    },
}

/// Watches a response body go by.
#[derive(Debug)]
pub struct ResponseObserver {
    kind: Kind,
    facts: ResponseFacts,
}

impl ResponseObserver {
    /// An observer for a response with this `content-type` and `content-encoding`.
    pub fn new(content_type: Option<&str>, content_encoding: Option<&str>) -> Self {
        let sse =
            content_type.is_some_and(|t| t.to_ascii_lowercase().contains("text/event-stream"));
        let kind = if sse {
            Kind::Sse {
                line: Vec::new(),
                skipping: false,
                event: None,
            }
        } else {
            Kind::Json {
                body: Vec::new(),
                overflow: false,
                gzip: content_encoding.is_some_and(|e| e.trim().eq_ignore_ascii_case("gzip")),
            }
        };
        ResponseObserver {
            kind,
            facts: ResponseFacts::default(),
        }
    }

    /// Sees the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        match &mut self.kind {
            Kind::Json { body, overflow, .. } => {
                if body.len() + chunk.len() > JSON_OBSERVE_CAP {
                    *overflow = true;
                } else {
                    body.extend_from_slice(chunk);
                }
            }
            Kind::Sse {
                line,
                skipping,
                event,
            } => {
                let mut rest = chunk;
                loop {
                    let end = rest.iter().position(|&b| b == b'\n');
                    let segment = &rest[..end.unwrap_or(rest.len())];
                    if !*skipping {
                        if line.len() + segment.len() > SSE_LINE_CAP {
                            *skipping = true;
                            line.clear();
                        } else {
                            line.extend_from_slice(segment);
                        }
                    }
                    let Some(end) = end else { break };
                    if !*skipping {
                        let text =
                            String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line));
                        sse_line(&text, event, &mut self.facts);
                    }
                    line.clear();
                    *skipping = false;
                    rest = &rest[end + 1..];
                }
            }
        }
    }

    /// The facts, once the body has ended (or been cut off).
    pub fn finish(mut self) -> ResponseFacts {
        match self.kind {
            Kind::Json {
                body,
                overflow,
                gzip,
            } => {
                if !overflow && !body.is_empty() {
                    let decoded = if gzip { gunzip(&body) } else { Some(body) };
                    if let Some(value) =
                        decoded.and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    {
                        json_document(&value, &mut self.facts);
                    }
                }
            }
            Kind::Sse {
                line,
                skipping,
                mut event,
            } => {
                if !skipping && !line.is_empty() {
                    sse_line(&String::from_utf8_lossy(&line), &mut event, &mut self.facts);
                }
            }
        }
        self.facts
    }
}

fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(JSON_OBSERVE_CAP as u64)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

/// As much of a gzip stream's start as decodes (for a payload snippet of a cut-off body).
pub fn gunzip_prefix(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut decoder = flate2::read::GzDecoder::new(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = decoder.read(&mut buf) {
        if n == 0 || out.len() > JSON_OBSERVE_CAP {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// A whole JSON response: a message (`usage`, `model`) or an error (`error.type`).
fn json_document(value: &Value, facts: &mut ResponseFacts) {
    if let Some(usage) = value.get("usage") {
        facts.usage.merge(usage);
    }
    if let Some(model) = value.get("model").and_then(Value::as_str) {
        facts.model = Some(model.to_string());
    }
    if let Some(kind) = value
        .get("error")
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
    {
        facts.error_type = Some(kind.to_string());
    }
}

/// One SSE line: `event: NAME` names the next data; `data: {...}` of `message_start`,
/// `message_delta` and `error` events carry usage and errors. A blank line ends the event.
fn sse_line(line: &str, event: &mut Option<String>, facts: &mut ResponseFacts) {
    if line.is_empty() {
        *event = None;
        return;
    }
    if let Some(name) = line.strip_prefix("event:") {
        *event = Some(name.trim().to_string());
        facts.events += 1;
        return;
    }
    let Some(data) = line.strip_prefix("data:") else {
        return;
    };
    let data = data.strip_prefix(' ').unwrap_or(data);
    // Only the events that carry usage or errors are parsed; content deltas are skipped cheaply.
    let wanted = matches!(
        event.as_deref(),
        Some("message_start" | "message_delta" | "error")
    ) || (event.is_none()
        && (data.contains("\"message_start\"")
            || data.contains("\"message_delta\"")
            || data.contains("\"error\"")));
    if !wanted {
        return;
    }
    let Ok(value) = serde_json::from_str::<Value>(data) else {
        return;
    };
    match value.get("type").and_then(Value::as_str) {
        Some("message_start") => {
            if let Some(message) = value.get("message") {
                json_document(message, facts);
            }
        }
        Some("message_delta") => {
            if let Some(usage) = value.get("usage") {
                facts.usage.merge(usage);
            }
        }
        Some("error") => json_document(&value, facts),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":3,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\
\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\
\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\
\n";

    #[test]
    fn usage_comes_from_message_start_and_message_delta_whatever_the_chunking() {
        let expected = ResponseFacts {
            usage: Usage {
                input_tokens: Some(25),
                output_tokens: Some(15),
                cache_creation_input_tokens: Some(3),
                cache_read_input_tokens: Some(100),
            },
            error_type: None,
            model: Some("claude-sonnet-4-5".to_string()),
            events: 4,
        };
        for size in [1, 7, 64, STREAM.len()] {
            let mut observer =
                ResponseObserver::new(Some("text/event-stream; charset=utf-8"), None);
            for chunk in STREAM.as_bytes().chunks(size) {
                observer.feed(chunk);
            }
            assert_eq!(observer.finish(), expected, "chunks of {size}");
        }
        // CRLF line ends are SSE too.
        let mut observer = ResponseObserver::new(Some("text/event-stream"), None);
        observer.feed(STREAM.replace('\n', "\r\n").as_bytes());
        assert_eq!(observer.finish(), expected);
    }

    #[test]
    fn errors_are_read_from_json_bodies_and_sse_error_events() {
        let mut observer = ResponseObserver::new(Some("application/json"), None);
        observer.feed(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            observer.finish().error_type.as_deref(),
            Some("overloaded_error")
        );
        let mut observer = ResponseObserver::new(Some("text/event-stream"), None);
        observer.feed(
            b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}\n\n",
        );
        assert_eq!(observer.finish().error_type.as_deref(), Some("api_error"));
    }

    #[test]
    fn a_gzipped_json_message_still_gives_its_usage() {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder
            .write_all(br#"{"model":"m","usage":{"input_tokens":1,"output_tokens":2}}"#)
            .unwrap();
        let gz = encoder.finish().unwrap();
        let mut observer = ResponseObserver::new(Some("application/json"), Some("gzip"));
        observer.feed(&gz);
        let facts = observer.finish();
        assert_eq!(facts.usage.output_tokens, Some(2));
        assert_eq!(facts.model.as_deref(), Some("m"));
    }

    #[test]
    fn the_model_override_rewrites_only_the_model() {
        let body = br#"{"model":"claude-opus-4","max_tokens":5,"stream":true,"messages":[]}"#;
        assert_eq!(
            request_facts(body),
            RequestFacts {
                model: Some("claude-opus-4".into()),
                stream: Some(true)
            }
        );
        let rewritten = override_model(body, "claude-haiku-4").unwrap();
        assert_eq!(
            String::from_utf8(rewritten).unwrap(),
            r#"{"model":"claude-haiku-4","max_tokens":5,"stream":true,"messages":[]}"#
        );
        assert_eq!(override_model(body, "claude-opus-4"), None);
        assert_eq!(override_model(b"not json", "x"), None);
        assert_eq!(override_model(br#"{"messages":[]}"#, "x"), None);
    }
}
