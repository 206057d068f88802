//! WebSocket upgrades: the handshake is forwarded to the upstream over its own HTTP/1.1
//! connection, and once both sides have switched protocols the bytes are copied both ways
//! unchanged (frames, masks, extensions and close handshakes are the endpoints' business).
//!
//! Connecting is bounded by `AGENTPACK_PROXY_WS_CONNECT_TIMEOUT_SECS`; a tunnel with no traffic
//! either way for `AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS` (or a write stuck that long) is closed.
//! One log line is written per WebSocket, when it closes. This module never parses frames.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tower_service::Service as _;

use super::forward::{self, fail, millis, ProxyBody, Refusal, Shared};
use super::log::{LogRecord, WebSocketBytes};

/// How a tunnel ended, when not by both sides closing.
#[derive(Debug, PartialEq, Eq)]
pub enum TunnelEnd {
    Idle,
    Io(String),
}

/// Copies bytes between `client` and `upstream` until both have closed, counting them in
/// `bytes`; gives up after `idle` without traffic (or on a write that long).
pub async fn pump<C, U>(
    client: C,
    upstream: U,
    idle: Duration,
    bytes: &mut WebSocketBytes,
) -> Result<(), TunnelEnd>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut upstream_read, mut upstream_write) = tokio::io::split(upstream);
    let mut from_client = vec![0u8; 16 * 1024];
    let mut from_upstream = vec![0u8; 16 * 1024];
    let (mut client_open, mut upstream_open) = (true, true);
    while client_open || upstream_open {
        tokio::select! {
            read = client_read.read(&mut from_client), if client_open => {
                match carry(read, &from_client, &mut upstream_write, idle).await? {
                    Some(n) => bytes.to_upstream += n as u64,
                    None => client_open = false,
                }
            }
            read = upstream_read.read(&mut from_upstream), if upstream_open => {
                match carry(read, &from_upstream, &mut client_write, idle).await? {
                    Some(n) => bytes.from_upstream += n as u64,
                    None => upstream_open = false,
                }
            }
            () = tokio::time::sleep(idle) => return Err(TunnelEnd::Idle),
        }
    }
    Ok(())
}

/// Passes on one read of a tunnel's direction: `Some(n)` when `chunk[..n]` was written to `to`
/// (within `idle`), `None` when the reading side closed (`to` is then shut down).
async fn carry<W: AsyncWrite + Unpin>(
    read: std::io::Result<usize>,
    chunk: &[u8],
    to: &mut W,
    idle: Duration,
) -> Result<Option<usize>, TunnelEnd> {
    let io = |error: std::io::Error| TunnelEnd::Io(error.to_string());
    let n = read.map_err(io)?;
    if n == 0 {
        let _ = to.shutdown().await;
        return Ok(None);
    }
    tokio::time::timeout(idle, to.write_all(&chunk[..n]))
        .await
        .map_err(|_| TunnelEnd::Idle)?
        .map_err(io)?;
    Ok(Some(n))
}

/// Writes the line of a WebSocket when it closes, or when the proxy stops under it.
struct TunnelLog {
    shared: Arc<Shared>,
    record: Option<LogRecord>,
    started: Instant,
    bytes: WebSocketBytes,
}

impl Drop for TunnelLog {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            record.latency_ms = millis(self.started);
            record.websocket = Some(self.bytes);
            self.shared.log.write(&record);
        }
    }
}

/// Serves a request that asks for a WebSocket.
pub async fn handle(
    shared: Arc<Shared>,
    mut request: Request<Incoming>,
    mut record: LogRecord,
    started: Instant,
    known: Vec<String>,
) -> Response<ProxyBody> {
    let client_upgrade = hyper::upgrade::on(&mut request);
    let (mut parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let mut response = match upstream_handshake(&shared, &mut parts, body).await {
        Ok(response) => response,
        Err(refusal) => return fail(&shared, record, started, refusal),
    };
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        // Refused: an ordinary response, streamed and logged like any other.
        return forward::observed_response(shared, record, started, known, response);
    }
    record.status = Some(101);
    record.ttfb_ms = Some(millis(started));
    record.upstream_version = Some(forward::version_name(response.version()));
    record.request_id = response
        .headers()
        .get("request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    record.response_headers = super::sanitize::sanitized_headers(response.headers());
    let upstream_upgrade = hyper::upgrade::on(&mut response);
    let mut switching = Response::new(forward::full(bytes::Bytes::new()));
    *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *switching.headers_mut() = response.headers().clone();
    let idle = shared.config.ws_idle_timeout;
    let mut log = TunnelLog {
        shared,
        record: Some(record),
        started,
        bytes: WebSocketBytes::default(),
    };
    tokio::spawn(async move {
        let outcome = match tokio::try_join!(client_upgrade, upstream_upgrade) {
            Ok((client, upstream)) => {
                pump(
                    TokioIo::new(client),
                    TokioIo::new(upstream),
                    idle,
                    &mut log.bytes,
                )
                .await
            }
            Err(error) => Err(TunnelEnd::Io(format!(
                "the upgrade did not complete: {error}"
            ))),
        };
        if let (Err(end), Some(record)) = (outcome, log.record.as_mut()) {
            match end {
                TunnelEnd::Idle => {
                    record.error_type = Some("ws_idle_timeout".into());
                    record.error_message = Some(format!(
                        "no traffic either way for {}s (AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS)",
                        idle.as_secs()
                    ));
                }
                TunnelEnd::Io(message) => {
                    record.error_type = Some("ws_io_error".into());
                    record.error_message = Some(message);
                }
            }
        }
        drop(log);
    });
    switching
}

/// Connects to the upstream and sends it the client's handshake request (hop-by-hop headers
/// stripped, `Host` set); the upstream's answer.
async fn upstream_handshake(
    shared: &Shared,
    parts: &mut hyper::http::request::Parts,
    body: bytes::Bytes,
) -> Result<Response<Incoming>, Refusal> {
    let Ok(target) = forward::upstream_target(&shared.config, &parts.uri) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request_target",
            "the request path is not valid".into(),
        ));
    };
    let connect_timeout = shared.config.ws_connect_timeout;
    let mut connector = shared.ws_connector.clone();
    let connect = async {
        std::future::poll_fn(|cx| connector.poll_ready(cx)).await?;
        connector.call(target.clone()).await
    };
    let stream = match tokio::time::timeout(connect_timeout, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            return Err(Refusal::new(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                format!(
                    "cannot connect the WebSocket to {}: {error}",
                    shared.config.upstream_display()
                ),
            ))
        }
        Err(_) => {
            return Err(Refusal::new(
                StatusCode::GATEWAY_TIMEOUT,
                "ws_connect_timeout",
                format!(
                    "no WebSocket connection to {} within {}s (AGENTPACK_PROXY_WS_CONNECT_TIMEOUT_SECS)",
                    shared.config.upstream_display(),
                    connect_timeout.as_secs()
                ),
            ))
        }
    };
    let handshake = async {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(stream).await?;
        tokio::spawn(connection.with_upgrades());
        let mut headers = std::mem::take(&mut parts.headers);
        forward::strip_hop_by_hop(&mut headers, true);
        forward::set_host(&mut headers, &shared.config);
        let mut upstream = Request::new(Full::new(body));
        *upstream.method_mut() = parts.method.clone();
        // The connection is the upstream's own: origin-form target (prefix, path, query).
        *upstream.uri_mut() = target
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .unwrap_or_default();
        *upstream.headers_mut() = headers;
        sender.send_request(upstream).await
    };
    let limit = shared.config.upstream_timeout.max(connect_timeout);
    match tokio::time::timeout(limit, handshake).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(error)) => Err(Refusal::new(
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            format!(
                "the WebSocket handshake with {} failed: {error}",
                shared.config.upstream_display()
            ),
        )),
        Err(_) => Err(Refusal::new(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            format!(
                "{} did not answer the WebSocket handshake within {}s",
                shared.config.upstream_display(),
                limit.as_secs()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_pump_copies_both_ways_and_stops_when_idle() {
        let (client_side, mut claude) = tokio::io::duplex(64);
        let (upstream_side, mut server) = tokio::io::duplex(64);
        let task = tokio::spawn(async move {
            let mut bytes = WebSocketBytes::default();
            let end = pump(
                client_side,
                upstream_side,
                Duration::from_millis(200),
                &mut bytes,
            )
            .await;
            (end, bytes)
        });
        claude.write_all(b"hello upstream").await.unwrap();
        let mut buf = [0u8; 14];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello upstream");
        server.write_all(b"hi").await.unwrap();
        let mut buf = [0u8; 2];
        claude.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
        // Nothing more either way: the idle timeout ends the tunnel.
        let (end, bytes) = task.await.unwrap();
        assert_eq!(end, Err(TunnelEnd::Idle));
        assert_eq!((bytes.to_upstream, bytes.from_upstream), (14, 2));
    }

    #[tokio::test]
    async fn the_pump_ends_cleanly_when_both_sides_close() {
        let (client_side, claude) = tokio::io::duplex(64);
        let (upstream_side, server) = tokio::io::duplex(64);
        drop(claude);
        drop(server);
        let mut bytes = WebSocketBytes::default();
        let end = pump(
            client_side,
            upstream_side,
            Duration::from_secs(5),
            &mut bytes,
        )
        .await;
        assert_eq!(end, Ok(()));
    }
}
