//! Forwarding one HTTP request from Claude to the upstream and streaming the response back.
//!
//! The request is forwarded as it came (method, path, query, headers in their order, body),
//! except for what a proxy must change: hop-by-hop headers are dropped, `host` names the upstream,
//! and with `AGENTPACK_PROXY_MODEL` the JSON body's `model`. The request body is read whole first
//! (it is one JSON document); the response body is passed on frame by frame as it arrives, never
//! buffered, while an observer reads usage and errors for the log. Every request, including those
//! that fail or that Claude abandons, leaves exactly one log line.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use super::config::{upstream_uri, ProxyConfig};
use super::log::{LogRecord, LogWriter, Snippet};
use super::observe::{self, ResponseObserver};
use super::sanitize;

/// The body type of every response the proxy sends.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;
/// The pooled upstream client.
pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What every request handler shares.
pub struct Shared {
    pub config: ProxyConfig,
    pub client: UpstreamClient,
    /// An HTTP/1.1-only connector for WebSocket upgrades, with the WebSocket connect timeout.
    pub ws_connector: HttpsConnector<HttpConnector>,
    pub log: LogWriter,
}

/// Headers that belong to one connection and are never forwarded.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes hop-by-hop headers (and those `connection` names), keeping the order of the rest
/// (`HeaderMap::remove` would move the last header into the gap). With `keep_upgrade`,
/// `connection` and `upgrade` stay (a WebSocket handshake needs them).
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
        .collect();
    let dropped = |name: &HeaderName| {
        let name = name.as_str();
        if keep_upgrade && (name == "connection" || name == "upgrade") {
            return false;
        }
        HOP_BY_HOP.contains(&name) || named.iter().any(|n| n == name)
    };
    if !headers.keys().any(dropped) {
        return;
    }
    let mut kept = HeaderMap::with_capacity(headers.len());
    let mut current: Option<HeaderName> = None;
    for (name, value) in std::mem::take(headers) {
        // `into_iter` names a header once, then yields its further values with `None`.
        if let Some(name) = name {
            current = Some(name);
        }
        if let Some(name) = &current {
            if !dropped(name) {
                kept.append(name.clone(), value);
            }
        }
    }
    *headers = kept;
}

/// Whether the request asks to switch protocols (a WebSocket).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
}

/// Points `host` at the upstream, in place (keeping the header's position).
pub fn set_host(headers: &mut HeaderMap, config: &ProxyConfig) {
    if let Some(authority) = config.upstream.authority() {
        if let Ok(value) = HeaderValue::from_str(authority.as_str()) {
            headers.insert(header::HOST, value);
        }
    }
}

/// An Anthropic-shaped error response from the proxy itself.
pub fn proxy_error(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "api_error", "message": format!("agentpack proxy: {message}")},
    })
    .to_string();
    let mut response = Response::new(full(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A complete body as a [`ProxyBody`].
pub fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// The version as the log spells it.
pub fn version_name(version: Version) -> String {
    match version {
        Version::HTTP_2 => "HTTP/2".to_string(),
        Version::HTTP_11 => "HTTP/1.1".to_string(),
        other => format!("{other:?}"),
    }
}

/// The error type and message of a failed upstream call, for the log (no URL userinfo or body
/// can be in it: the upstream has none, and hyper's errors carry no payload).
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    agentpack_builders::error_text::one_line(error)
}

/// Serves one request from Claude.
pub async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let started = Instant::now();
    let mut record = LogRecord::new(
        SystemTime::now(),
        request.method().as_str(),
        request.uri().path(),
    );
    record.request_headers = sanitize::sanitized_headers(request.headers());
    let known = sanitize::credential_values(request.headers());
    if is_upgrade(request.headers()) {
        return Ok(super::ws::handle(shared, request, record, started, known).await);
    }
    let (mut parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let refusal = Refusal::told(
                StatusCode::BAD_REQUEST,
                "client_body_error",
                describe(&error),
                "the request body could not be read",
            );
            return Ok(fail(&shared, record, started, refusal));
        }
    };
    record.request_bytes = body.len() as u64;
    let facts = observe::request_facts(&body);
    record.stream = facts.stream;
    record.model = facts.model.clone();
    if shared.config.log_payloads {
        record.request_body = Some(snippet(&body, shared.config.max_body_bytes, &known));
    }
    let body = match shared
        .config
        .model_override
        .as_deref()
        .and_then(|model| observe::override_model(&body, model).map(|b| (model, b)))
    {
        Some((model, rewritten)) => {
            record.model_requested = facts.model;
            record.model = Some(model.to_string());
            if parts.headers.contains_key(header::CONTENT_LENGTH) {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(rewritten.len()));
            }
            Bytes::from(rewritten)
        }
        None => body,
    };
    let uri = match upstream_target(&shared.config, &parts.uri) {
        Ok(uri) => uri,
        Err(error) => {
            let refusal = Refusal::told(
                StatusCode::BAD_REQUEST,
                "bad_request_target",
                error.to_string(),
                "the request path is not valid",
            );
            return Ok(fail(&shared, record, started, refusal));
        }
    };
    let mut headers = std::mem::take(&mut parts.headers);
    strip_hop_by_hop(&mut headers, false);
    set_host(&mut headers, &shared.config);
    let mut upstream = Request::new(Full::new(body));
    *upstream.method_mut() = parts.method;
    *upstream.uri_mut() = uri;
    *upstream.headers_mut() = headers;
    let timeout = shared.config.upstream_timeout;
    let response = match tokio::time::timeout(timeout, shared.client.request(upstream)).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => {
            let refusal = Refusal::told(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                describe(&error),
                format!("cannot reach {}", shared.config.upstream_display()),
            );
            return Ok(fail(&shared, record, started, refusal));
        }
        Err(_) => {
            let upstream = shared.config.upstream_display();
            let seconds = timeout.as_secs();
            let refusal = Refusal::told(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_timeout",
                format!("no response headers from {upstream} within {seconds}s (AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS)"),
                format!("{upstream} sent no response within {seconds}s"),
            );
            return Ok(fail(&shared, record, started, refusal));
        }
    };
    Ok(observed_response(shared, record, started, known, response))
}

/// Why the proxy answers a request itself, without the upstream's body: the status, the logged
/// error type, what the log says and what Claude is told.
pub struct Refusal {
    status: StatusCode,
    kind: &'static str,
    /// The log's `error_message` (never a body or a credential).
    logged: String,
    /// The message of the error response Claude gets.
    told: String,
}

impl Refusal {
    /// A refusal that logs and tells the same message.
    pub fn new(status: StatusCode, kind: &'static str, message: String) -> Self {
        Refusal::told(status, kind, message.clone(), message)
    }

    /// A refusal whose log line says more than the answer Claude gets.
    pub fn told(
        status: StatusCode,
        kind: &'static str,
        logged: String,
        told: impl Into<String>,
    ) -> Self {
        Refusal {
            status,
            kind,
            logged,
            told: told.into(),
        }
    }
}

/// Logs a request the proxy could not serve and answers it with the refusal's status and message.
pub fn fail(
    shared: &Shared,
    mut record: LogRecord,
    started: Instant,
    refusal: Refusal,
) -> Response<ProxyBody> {
    record.status = Some(refusal.status.as_u16());
    record.error_type = Some(refusal.kind.to_string());
    record.error_message = Some(refusal.logged);
    record.latency_ms = millis(started);
    shared.log.write(&record);
    proxy_error(refusal.status, &refusal.told)
}

/// Where the upstream gets a request for `uri`: the upstream's base, then the request's path and
/// query ([`upstream_uri`]).
pub fn upstream_target(config: &ProxyConfig, uri: &Uri) -> Result<Uri, hyper::http::Error> {
    upstream_uri(
        &config.upstream,
        uri.path_and_query().map_or("/", |p| p.as_str()),
    )
}

/// Milliseconds since `started`, for the log.
pub fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn snippet(bytes: &[u8], max: usize, known: &[String]) -> Snippet {
    let (text, truncated) = sanitize::snippet(bytes, max, known);
    Snippet { text, truncated }
}

/// The upstream's response as Claude gets it: the same status and headers (minus hop-by-hop),
/// the body streamed through an observer that writes the log line when the body ends.
pub fn observed_response(
    shared: Arc<Shared>,
    mut record: LogRecord,
    started: Instant,
    known: Vec<String>,
    response: Response<Incoming>,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    record.status = Some(parts.status.as_u16());
    record.upstream_version = Some(version_name(parts.version));
    record.request_id = parts
        .headers
        .get("request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    record.response_headers = sanitize::sanitized_headers(&parts.headers);
    let text = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let observer =
        ResponseObserver::new(text(header::CONTENT_TYPE), text(header::CONTENT_ENCODING));
    let gzip =
        text(header::CONTENT_ENCODING).is_some_and(|e| e.trim().eq_ignore_ascii_case("gzip"));
    strip_hop_by_hop(&mut parts.headers, false);
    parts.version = Version::HTTP_11;
    let headers_ms = millis(started);
    let payload_cap = shared.config.log_payloads.then(|| {
        shared
            .config
            .max_body_bytes
            .saturating_mul(2)
            .saturating_add(512)
    });
    let body = ObservedBody {
        inner: body,
        pending: Some(Pending {
            shared,
            record,
            started,
            headers_ms,
            observer,
            payload: Vec::new(),
            payload_cap,
            gzip,
            known,
        }),
    };
    Response::from_parts(parts, body.boxed())
}

/// The log line's parts while the body is still flowing.
struct Pending {
    shared: Arc<Shared>,
    record: LogRecord,
    started: Instant,
    headers_ms: u64,
    observer: ResponseObserver,
    /// The start of the body, for the payload snippet (only with payload logging).
    payload: Vec<u8>,
    payload_cap: Option<usize>,
    gzip: bool,
    known: Vec<String>,
}

impl Pending {
    fn saw(&mut self, data: &Bytes) {
        if data.is_empty() {
            return;
        }
        if self.record.ttfb_ms.is_none() {
            self.record.ttfb_ms = Some(millis(self.started));
        }
        self.record.response_bytes += data.len() as u64;
        self.observer.feed(data);
        if let Some(cap) = self.payload_cap {
            let room = cap.saturating_sub(self.payload.len());
            self.payload
                .extend_from_slice(&data[..data.len().min(room)]);
        }
    }

    fn finish(self, error: Option<(&str, String)>) {
        let Pending {
            shared,
            mut record,
            started,
            headers_ms,
            observer,
            payload,
            payload_cap,
            gzip,
            known,
        } = self;
        record.latency_ms = millis(started);
        record.ttfb_ms.get_or_insert(headers_ms);
        let facts = observer.finish();
        if !facts.usage.is_empty() {
            record.usage = Some(facts.usage);
        }
        if record.model.is_none() {
            record.model = facts.model;
        }
        record.error_type = facts.error_type;
        if let Some((kind, message)) = error {
            record.error_type.get_or_insert_with(|| kind.to_string());
            record.error_message = Some(message);
        }
        if payload_cap.is_some() {
            let bytes = if gzip {
                observe::gunzip_prefix(&payload)
            } else {
                payload
            };
            record.response_body = Some(snippet(&bytes, shared.config.max_body_bytes, &known));
        }
        shared.log.write(&record);
    }
}

/// The upstream body, passed on frame by frame; the log line is written when it ends, fails, or
/// is dropped unfinished (Claude went away).
struct ObservedBody {
    inner: Incoming,
    pending: Option<Pending>,
}

impl Body for ObservedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(pending)) = (frame.data_ref(), this.pending.as_mut()) {
                    pending.saw(data);
                }
                if this.inner.is_end_stream() {
                    if let Some(pending) = this.pending.take() {
                        pending.finish(None);
                    }
                }
            }
            Poll::Ready(Some(Err(error))) => {
                if let Some(pending) = this.pending.take() {
                    pending.finish(Some(("upstream_body_error", describe(error))));
                }
            }
            Poll::Ready(None) => {
                if let Some(pending) = this.pending.take() {
                    pending.finish(None);
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ObservedBody {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            if self.inner.is_end_stream() {
                pending.finish(None);
            } else {
                pending.finish(Some((
                    "client_closed",
                    "Claude closed the connection before the response ended".to_string(),
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_dropped_and_the_rest_keep_their_order() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("host", "127.0.0.1:5000"),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
            ("content-type", "application/json"),
            ("transfer-encoding", "chunked"),
            ("x-api-key", "k"),
            ("te", "trailers"),
            ("anthropic-version", "2023-06-01"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers, false);
        let names: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            ["host", "content-type", "x-api-key", "anthropic-version"]
        );
        // Repeated headers keep all their values.
        let mut headers = HeaderMap::new();
        headers.append("te", HeaderValue::from_static("trailers"));
        headers.append("anthropic-beta", HeaderValue::from_static("a"));
        headers.append("anthropic-beta", HeaderValue::from_static("b"));
        strip_hop_by_hop(&mut headers, false);
        assert_eq!(headers.get_all("anthropic-beta").iter().count(), 2);
    }

    #[test]
    fn upgrades_keep_connection_and_upgrade() {
        let mut headers = HeaderMap::new();
        headers.append("connection", HeaderValue::from_static("Upgrade"));
        headers.append("upgrade", HeaderValue::from_static("websocket"));
        headers.append("sec-websocket-key", HeaderValue::from_static("abc"));
        assert!(is_upgrade(&headers));
        strip_hop_by_hop(&mut headers, true);
        assert_eq!(headers.len(), 3);
        headers.remove("connection");
        assert!(!is_upgrade(&headers));
    }
}
