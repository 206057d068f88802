//! `agentpack --proxy claude` through the real binary, against a fake Anthropic upstream that this
//! test serves on 127.0.0.1.
//!
//! The stand-in `claude` is this test binary itself: a two-line script (`CLAUDE_PATH`) re-runs it
//! with `--exact proxy::standin_claude`, and that function, seeing `STANDIN_OUT`, plays Claude Code: it
//! sends the requests named in `STANDIN_STEPS` to `ANTHROPIC_BASE_URL` with a raw HTTP/1.1 client
//! (or a WebSocket client) and writes what came back under `STANDIN_OUT`. The same client code
//! calls the fake upstream directly, so "what reaches the upstream and what comes back is the same
//! as a direct call" is compared byte for byte.

#![allow(clippy::unwrap_used, clippy::print_stderr)] // tests may unwrap

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentpack_test_support::IsolatedHome;

/// The API key Claude sends; it must appear nowhere under the log directory.
const SENTINEL_KEY: &str = "sk-ant-api03-SENTINEL0123456789abcdef";
/// A fixed date, so the proxied response carries the upstream's and not hyper's own.
const DATE: &str = "Tue, 01 Dec 2026 12:00:00 GMT";
const EVENTS: [&str; 4] = [
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-test\",\"usage\":{\"input_tokens\":21,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":12}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
];

// ----- the fake upstream -----

/// One WebSocket as the upstream saw it: the handshake headers (minus the per-connection key)
/// and the messages.
type SeenWebSocket = (Vec<(String, String)>, Vec<String>);

#[derive(Default)]
struct UpstreamState {
    /// Raw request heads and bodies of HTTP requests, in arrival order.
    requests: Vec<Vec<u8>>,
    /// Per WebSocket: the handshake headers (minus the per-connection key) and the messages.
    websockets: Vec<SeenWebSocket>,
    /// Per SSE response: whether the client had the first event before the rest was sent.
    streamed: Vec<bool>,
}

struct Upstream {
    port: u16,
    state: Arc<Mutex<UpstreamState>>,
}

impl Upstream {
    fn start(gate: PathBuf) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(UpstreamState::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = shared.clone();
                let gate = gate.clone();
                std::thread::spawn(move || serve_upstream(stream, &state, &gate));
            }
        });
        Upstream { port, state }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn take(&self) -> UpstreamState {
        std::mem::take(&mut *self.state.lock().unwrap())
    }
}

/// Reads a request head (through the blank line) without consuming anything after it.
fn peek_head(stream: &TcpStream) -> Option<String> {
    let mut buf = vec![0u8; 65536];
    for _ in 0..500 {
        let n = stream.peek(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = find(&buf[..n], b"\r\n\r\n") {
            return Some(String::from_utf8_lossy(&buf[..end + 4]).into_owned());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn serve_upstream(mut stream: TcpStream, state: &Mutex<UpstreamState>, gate: &Path) {
    let Some(head) = peek_head(&stream) else {
        return;
    };
    if header(&head, "upgrade").is_some() {
        return serve_websocket(stream, state);
    }
    let mut raw = vec![0u8; head.len()];
    stream.read_exact(&mut raw).unwrap();
    let length: usize = header(&head, "content-length").map_or(0, |v| v.parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    raw.extend_from_slice(&body);
    state.lock().unwrap().requests.push(raw);
    let target = head.split(' ').nth(1).unwrap_or("/").to_string();
    let text = String::from_utf8_lossy(&body).into_owned();
    if target.starts_with("/v1/cut") {
        // Starts a stream and dies in the middle of it.
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{}\r\n",
            EVENTS[0].len(),
            EVENTS[0]
        );
        return;
    }
    if target.starts_with("/v1/hang") {
        // Never answers (the proxy's response timeout must end it).
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    if text.contains("\"force-error\"") {
        let error = format!(
            "{{\"type\":\"error\",\"error\":{{\"type\":\"invalid_request_error\",\"message\":\"echo of {SENTINEL_KEY}: {}\"}}}}",
            "x".repeat(5000)
        );
        let response = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nrequest-id: req_err_1\r\ndate: {DATE}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{error}",
            error.len()
        );
        let _ = stream.write_all(response.as_bytes());
        return;
    }
    if !text.contains("\"claude-test\"") {
        // Not the stand-in: the real Claude Code, answered with a complete message at once.
        return answer_real_claude(stream, &text);
    }
    // A streamed message: the first event, then the rest only once the client has the first.
    let _ = stream.write_all(
        format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\nrequest-id: req_sse_1\r\nanthropic-ratelimit-requests-remaining: 99\r\ndate: {DATE}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
            .as_bytes(),
    );
    let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
    let _ = stream.write_all(chunk(EVENTS[0]).as_bytes());
    let _ = stream.flush();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gate.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    state.lock().unwrap().streamed.push(gate.exists());
    for event in &EVENTS[1..] {
        let _ = stream.write_all(chunk(event).as_bytes());
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

/// What the fake upstream tells the real Claude Code.
const REAL_REPLY: &str = "PONG-FROM-THE-FAKE-UPSTREAM";

/// A valid Messages API answer, streamed (SSE) or not, for the real Claude Code in print mode.
fn answer_real_claude(mut stream: TcpStream, body: &str) {
    let request: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let model = request["model"].as_str().unwrap_or("claude-x").to_string();
    let usage = serde_json::json!({"input_tokens": 11, "output_tokens": 1});
    if request["stream"] != true {
        let message = serde_json::json!({"id": "msg_real", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": REAL_REPLY}], "stop_reason": "end_turn", "stop_sequence": null, "usage": usage})
        .to_string();
        let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nrequest-id: req_real_json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{message}", message.len());
        return;
    }
    let events = [
        (
            "message_start",
            serde_json::json!({"type": "message_start", "message": {"id": "msg_real", "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
        ),
        (
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": REAL_REPLY}}),
        ),
        (
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", serde_json::json!({"type": "message_stop"})),
    ];
    let mut out = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nrequest-id: req_real_sse\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    for (name, data) in events {
        let event = format!("event: {name}\ndata: {data}\n\n");
        out.push_str(&format!("{:x}\r\n{event}\r\n", event.len()));
    }
    out.push_str("0\r\n\r\n");
    let _ = stream.write_all(out.as_bytes());
}

#[allow(clippy::result_large_err)] // tungstenite's callback type
fn serve_websocket(stream: TcpStream, state: &Mutex<UpstreamState>) {
    let mut seen_headers = Vec::new();
    let callback = |request: &tungstenite::handshake::server::Request,
                    response: tungstenite::handshake::server::Response| {
        for (name, value) in request.headers() {
            if name != "sec-websocket-key" {
                seen_headers.push((name.to_string(), value.to_str().unwrap().to_string()));
            }
        }
        seen_headers.push(("target".to_string(), request.uri().to_string()));
        Ok(response)
    };
    let mut socket = tungstenite::accept_hdr(stream, callback).unwrap();
    let mut messages = Vec::new();
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Text(text)) => {
                messages.push(format!("text:{text}"));
                socket
                    .send(tungstenite::Message::text(format!("echo:{text}")))
                    .unwrap();
            }
            Ok(tungstenite::Message::Binary(bytes)) => {
                messages.push(format!("binary:{:?}", bytes.to_vec()));
                let mut back = bytes.to_vec();
                back.reverse();
                socket.send(tungstenite::Message::binary(back)).unwrap();
            }
            Ok(tungstenite::Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    state
        .lock()
        .unwrap()
        .websockets
        .push((seen_headers, messages));
}

// ----- the stand-in Claude (and the direct client) -----

/// Host and port of an `http://host:port` base URL.
fn authority(base: &str) -> String {
    base.trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string()
}

/// Sends one raw HTTP/1.1 request; returns the status line, the response headers (lowercase
/// names, hop-by-hop ones left out) and the decoded body. Calls `on_first_chunk` as soon as the
/// first body bytes arrive.
fn http_call(base: &str, target: &str, body: &str, on_first_chunk: &dyn Fn()) -> String {
    let host = authority(base);
    let mut stream = TcpStream::connect(&host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "POST {target} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\nx-api-key: {SENTINEL_KEY}\r\nanthropic-version: 2023-06-01\r\nanthropic-beta: interleaved-thinking-2025-05-14\r\naccept: text/event-stream\r\nuser-agent: claude-cli/2.1.296 (external, cli)\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v == "chunked")
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if body.is_empty() {
                on_first_chunk();
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = headers.get("content-length") {
        body = vec![0u8; length.parse().unwrap()];
        reader.read_exact(&mut body).unwrap();
    } else {
        reader.read_to_end(&mut body).unwrap();
    }
    for hop in [
        "connection",
        "transfer-encoding",
        "keep-alive",
        "content-length",
    ] {
        headers.remove(hop);
    }
    format!(
        "{}{}\n\n{}",
        status,
        headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}\n"))
            .collect::<String>(),
        String::from_utf8_lossy(&body)
    )
}

fn websocket_call(base: &str) -> String {
    let host = authority(base);
    let stream = TcpStream::connect(&host).unwrap();
    let request = tungstenite::http::Request::builder()
        .uri(format!("ws://{host}/v1/realtime?session=1"))
        .header("host", &host)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header(
            "sec-websocket-key",
            tungstenite::handshake::client::generate_key(),
        )
        .header("x-api-key", SENTINEL_KEY)
        .header("anthropic-version", "2023-06-01")
        .body(())
        .unwrap();
    let (mut socket, response) = tungstenite::client(request, stream).unwrap();
    let mut out = format!("status {}\n", response.status());
    socket
        .send(tungstenite::Message::text("hello upstream"))
        .unwrap();
    socket
        .send(tungstenite::Message::binary(vec![1u8, 2, 3, 4]))
        .unwrap();
    for _ in 0..2 {
        match socket.read().unwrap() {
            tungstenite::Message::Text(text) => out.push_str(&format!("text:{text}\n")),
            tungstenite::Message::Binary(bytes) => {
                out.push_str(&format!("binary:{:?}\n", bytes.to_vec()))
            }
            other => out.push_str(&format!("other:{other:?}\n")),
        }
    }
    socket.close(None).unwrap();
    // Read until the close handshake completes.
    while socket.read().is_ok() {}
    out
}

/// Starts the streamed request and hangs up after the first bytes of the body (Esc in Claude).
fn abandon_stream(base: &str, gate: &Path) -> String {
    let host = authority(base);
    let mut stream = TcpStream::connect(&host).unwrap();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\nx-api-key: {SENTINEL_KEY}\r\ncontent-length: {}\r\n\r\n{STREAM_BODY}",
        STREAM_BODY.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("message_start") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(stream);
    std::fs::write(gate, b"").unwrap();
    "abandoned".to_string()
}

/// A stream the upstream cuts off: reads to the end, says whether the response ended properly.
fn cut_stream(base: &str) -> String {
    let host = authority(base);
    let mut stream = TcpStream::connect(&host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /v1/cut HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{STREAM_BODY}",
        STREAM_BODY.len()
    )
    .unwrap();
    let mut seen = Vec::new();
    let _ = stream.read_to_end(&mut seen);
    let text = String::from_utf8_lossy(&seen);
    format!(
        "first event: {}, terminated: {}",
        text.contains("message_start"),
        text.ends_with("0\r\n\r\n")
    )
}

/// Opens a WebSocket and sends nothing; returns how it ended.
fn silent_websocket(base: &str) -> String {
    let host = authority(base);
    let stream = TcpStream::connect(&host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (mut socket, _) = tungstenite::client(format!("ws://{host}/v1/idle"), stream).unwrap();
    let started = Instant::now();
    let end = socket.read();
    let waited = started.elapsed();
    assert!(end.is_err(), "{end:?}");
    format!("closed after {}s", waited.as_secs())
}

const STREAM_BODY: &str = r#"{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

/// One step of the stand-in; returns what it saw.
fn step(name: &str, base: &str, gate: &Path) -> String {
    match name {
        "sse" => http_call(base, "/v1/messages?beta=true", STREAM_BODY, &|| {
            std::fs::write(gate, b"").unwrap();
        }),
        "ws" => websocket_call(base),
        // The names of the launcher's threads (this process's parent) while the agent runs.
        "threads" => {
            let tasks = format!("/proc/{}/task", std::os::unix::process::parent_id());
            let mut names: Vec<String> = std::fs::read_dir(tasks)
                .unwrap()
                .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap())
                .collect();
            names.sort();
            names.concat()
        }
        "error" => http_call(
            base,
            "/v1/messages",
            &format!(
                r#"{{"model":"force-error","system":"{}","note":"{SENTINEL_KEY}"}}"#,
                "s".repeat(300)
            ),
            &|| {},
        ),
        "hang" => http_call(base, "/v1/hang", r#"{"model":"claude-test"}"#, &|| {}),
        "abort" => abandon_stream(base, gate),
        "cut" => cut_stream(base),
        "ws-idle" => silent_websocket(base),
        other => panic!("unknown step {other}"),
    }
}

/// Not a test: the body of the stand-in `claude`. Without `STANDIN_OUT` it does nothing.
#[test]
fn standin_claude() {
    let Some(out) = std::env::var_os("STANDIN_OUT").map(PathBuf::from) else {
        return;
    };
    let base = std::env::var("ANTHROPIC_BASE_URL").unwrap();
    std::fs::write(out.join("base_url.txt"), &base).unwrap();
    let gate = PathBuf::from(std::env::var("STANDIN_GATE").unwrap());
    for name in std::env::var("STANDIN_STEPS").unwrap().split(',') {
        let seen = step(name, &base, &gate);
        std::fs::write(out.join(format!("{name}.out")), seen).unwrap();
    }
    let code = std::env::var("STANDIN_EXIT").map_or(0, |c| c.parse().unwrap());
    std::process::exit(code);
}

// ----- the harness -----

struct Setup {
    iso: IsolatedHome,
    upstream: Upstream,
    claude: PathBuf,
    out: PathBuf,
    gate: PathBuf,
    logs: PathBuf,
}

fn setup() -> Setup {
    let iso = IsolatedHome::new();
    let root = iso.project.parent().unwrap().to_path_buf();
    let out = root.join("standin-out");
    std::fs::create_dir_all(&out).unwrap();
    let gate = root.join("gate");
    let claude = root.join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\nexec '{}' --exact proxy::standin_claude --nocapture --test-threads=1 -q\n",
            std::env::current_exe().unwrap().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        iso.project.join("agentpack.toml"),
        "name = \"demo\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let logs = root.join("proxy-logs");
    let upstream = Upstream::start(gate.clone());
    Setup {
        iso,
        upstream,
        claude,
        out,
        gate,
        logs,
    }
}

impl Setup {
    fn agentpack(&self, args: &[&str], steps: &str, envs: &[(&str, &str)]) -> std::process::Output {
        let _ = std::fs::remove_file(&self.gate);
        let mut command = self
            .iso
            .command(&assert_cmd::cargo::cargo_bin("agentpack"), None);
        command
            .env("CLAUDE_PATH", &self.claude)
            .env("STANDIN_OUT", &self.out)
            .env("STANDIN_GATE", &self.gate)
            .env("STANDIN_STEPS", steps)
            .env("ANTHROPIC_BASE_URL", self.upstream.url())
            .env("AGENTPACK_PROXY_LOG_DIR", &self.logs)
            .args(args);
        for (name, value) in envs {
            command.env(name, value);
        }
        command.output().unwrap()
    }

    fn seen(&self, step: &str) -> String {
        std::fs::read_to_string(self.out.join(format!("{step}.out"))).unwrap()
    }

    /// Every log line written so far, parsed.
    fn log_lines(&self) -> Vec<serde_json::Value> {
        let mut lines = Vec::new();
        for entry in std::fs::read_dir(&self.logs).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            lines.extend(text.lines().map(|l| serde_json::from_str(l).unwrap()));
        }
        lines
    }

    /// Every byte under the log directory, as text.
    fn all_log_text(&self) -> String {
        let mut text = String::new();
        for entry in std::fs::read_dir(&self.logs).unwrap() {
            text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
        text
    }
}

fn assert_ok(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "agentpack failed ({:?}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn streamed_requests_and_websockets_pass_through_unchanged_and_are_logged_without_credentials() {
    let t = setup();
    // The direct calls first: what the upstream receives and sends without the proxy.
    let _ = std::fs::remove_file(&t.gate);
    let direct_sse = step("sse", &t.upstream.url(), &t.gate);
    let direct_ws = websocket_call(&t.upstream.url());
    let direct = t.upstream.take();

    let output = t.agentpack(&["--proxy", "claude"], "sse,ws,threads", &[]);
    assert_ok(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Claude API proxy on http://127.0.0.1:"),
        "{stderr}"
    );
    let proxied = t.upstream.take();

    // The launcher runs the proxy's thread (the hot path's threads: see the test without --proxy).
    assert!(t.seen("threads").contains("agentpack-proxy\n"));
    // Claude talked to the proxy, not to the upstream.
    let base = std::fs::read_to_string(t.out.join("base_url.txt")).unwrap();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    assert_ne!(base, t.upstream.url());

    // Byte for byte: the request head and body reaching the upstream, the response coming back.
    assert_eq!(proxied.requests.len(), 1);
    assert_eq!(
        String::from_utf8_lossy(&proxied.requests[0]),
        String::from_utf8_lossy(&direct.requests[0])
    );
    assert_eq!(t.seen("sse"), direct_sse);
    assert!(direct_sse.contains(EVENTS[2]), "{direct_sse}");
    // Streamed: Claude had the first event before the upstream sent the second.
    assert_eq!(proxied.streamed, vec![true]);
    assert_eq!(direct.streamed, vec![true]);

    // The WebSocket: the same handshake headers (the per-connection key aside, and the key is
    // checked by the client against the upstream's accept) and the same messages both ways.
    assert_eq!(proxied.websockets, direct.websockets);
    assert_eq!(proxied.websockets.len(), 1);
    assert_eq!(
        proxied.websockets[0].1,
        ["text:hello upstream", "binary:[1, 2, 3, 4]"]
    );
    assert_eq!(t.seen("ws"), direct_ws);
    assert_eq!(
        direct_ws,
        "status 101 Switching Protocols\ntext:echo:hello upstream\nbinary:[4, 3, 2, 1]\n"
    );

    // The log: one line per request with the documented fields, and no credential anywhere.
    let lines = t.log_lines();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let sse = lines.iter().find(|l| l["status"] == 200).unwrap();
    assert_eq!(sse["method"], "POST");
    assert_eq!(sse["path"], "/v1/messages");
    assert_eq!(sse["request_id"], "req_sse_1");
    assert_eq!(sse["model"], "claude-test");
    assert_eq!(sse["stream"], true);
    assert_eq!(
        sse["usage"],
        serde_json::json!({"input_tokens": 21, "output_tokens": 12, "cache_read_input_tokens": 7})
    );
    assert_eq!(sse["error_type"], serde_json::Value::Null);
    assert!(sse["latency_ms"].as_u64().unwrap() >= sse["ttfb_ms"].as_u64().unwrap());
    assert!(sse["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(sse["request_headers"]["anthropic-version"], "2023-06-01");
    assert_eq!(
        sse["response_headers"]["anthropic-ratelimit-requests-remaining"],
        "99"
    );
    assert!(sse.get("request_body").is_none());
    assert!(sse.get("response_body").is_none());
    let ws = lines.iter().find(|l| l["status"] == 101).unwrap();
    assert_eq!(ws["path"], "/v1/realtime");
    assert_eq!(ws["method"], "GET");
    assert!(ws["websocket"]["to_upstream"].as_u64().unwrap() > 0);
    assert!(ws["websocket"]["from_upstream"].as_u64().unwrap() > 0);
    assert_eq!(ws["error_type"], serde_json::Value::Null);

    let text = t.all_log_text();
    assert!(!text.contains("SENTINEL"), "{text}");
    assert!(!text.contains("x-api-key"), "{text}");
    // Private: 0700 directory, 0600 files.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&t.logs), 0o700);
    for entry in std::fs::read_dir(&t.logs).unwrap() {
        assert_eq!(mode(&entry.unwrap().path()), 0o600);
    }
}

#[test]
fn payload_logging_keeps_redacted_snippets_cut_at_the_limit() {
    let t = setup();
    let output = t.agentpack(
        &["--proxy", "claude"],
        "error",
        &[
            ("AGENTPACK_PROXY_LOG_PAYLOADS", "yes"),
            ("AGENTPACK_PROXY_LOG_MAX_BODY_BYTES", "100"),
        ],
    );
    assert_ok(&output);
    // Claude got the upstream's error unchanged.
    let seen = t.seen("error");
    assert!(seen.starts_with("HTTP/1.1 400 Bad Request"), "{seen}");
    assert!(seen.contains(&format!("echo of {SENTINEL_KEY}")));
    let lines = t.log_lines();
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["status"], 400);
    assert_eq!(line["error_type"], "invalid_request_error");
    assert_eq!(line["request_id"], "req_err_1");
    let response = line["response_body"]["text"].as_str().unwrap();
    assert_eq!(line["response_body"]["truncated"], true);
    assert!(response.len() <= 100, "{response}");
    assert!(
        response.starts_with(r#"{"type":"error","error":{"type":"invalid_request_error","message":"echo of [REDACTED]"#),
        "{response}"
    );
    let request = line["request_body"]["text"].as_str().unwrap();
    assert!(
        request.starts_with(r#"{"model":"force-error","system":"sss"#),
        "{request}"
    );
    assert!(request.len() <= 100);
    assert_eq!(line["request_body"]["truncated"], true);
    assert!(!t.all_log_text().contains("SENTINEL"));
}

#[test]
fn an_upstream_that_never_answers_times_out_with_a_clear_log_line() {
    let t = setup();
    let started = Instant::now();
    let output = t.agentpack(
        &["--proxy", "claude"],
        "hang",
        &[("AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS", "1")],
    );
    assert_ok(&output);
    assert!(started.elapsed() < Duration::from_secs(20));
    let seen = t.seen("hang");
    assert!(seen.starts_with("HTTP/1.1 504"), "{seen}");
    assert!(seen.contains("agentpack proxy:"), "{seen}");
    let lines = t.log_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["status"], 504);
    assert_eq!(lines[0]["path"], "/v1/hang");
    assert_eq!(lines[0]["error_type"], "upstream_timeout");
    assert!(lines[0]["error_message"]
        .as_str()
        .unwrap()
        .contains("within 1s (AGENTPACK_PROXY_UPSTREAM_TIMEOUT_SECS)"));
    assert!(lines[0]["latency_ms"].as_u64().unwrap() >= 1000);
}

#[test]
fn the_model_override_and_the_upstream_override_change_only_what_they_name() {
    let t = setup();
    // A second upstream the user's ANTHROPIC_BASE_URL does not name.
    let other = Upstream::start(t.gate.clone());
    let output = t.agentpack(
        &["--proxy", "claude"],
        "sse",
        &[
            ("AGENTPACK_PROXY_UPSTREAM", &other.url()),
            ("AGENTPACK_PROXY_MODEL", "claude-override"),
            ("AGENTPACK_PROXY_TRANSPORT", "http1"),
        ],
    );
    assert_ok(&output);
    assert!(t.upstream.take().requests.is_empty());
    let seen = other.take();
    assert_eq!(seen.requests.len(), 1);
    let request = String::from_utf8_lossy(&seen.requests[0]).into_owned();
    let expected_body = STREAM_BODY.replace("claude-test", "claude-override");
    assert!(request.ends_with(&expected_body), "{request}");
    assert!(request.contains(&format!("content-length: {}\r\n", expected_body.len())));
    assert!(request.contains(&format!("host: 127.0.0.1:{}\r\n", other.port)));
    let line = &t.log_lines()[0];
    assert_eq!(line["model"], "claude-override");
    assert_eq!(line["model_requested"], "claude-test");
    assert_eq!(line["upstream_version"], "HTTP/1.1");
}

#[test]
fn claudes_exit_code_is_agentpacks_and_other_agents_are_refused() {
    let t = setup();
    let output = t.agentpack(&["--proxy", "claude"], "sse", &[("STANDIN_EXIT", "7")]);
    assert_eq!(
        output.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The proxy stopped with Claude: its port no longer accepts.
    let base = std::fs::read_to_string(t.out.join("base_url.txt")).unwrap();
    assert!(TcpStream::connect(authority(&base)).is_err());

    let refused = t.agentpack(&["--proxy", "codex"], "sse", &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--proxy works only with Claude Code")
            && stderr.contains("agentpack --proxy claude"),
        "{stderr}"
    );
    let bad = t.agentpack(
        &["--proxy", "claude"],
        "sse",
        &[("AGENTPACK_PROXY_TRANSPORT", "quic")],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("AGENTPACK_PROXY_TRANSPORT=\"quic\""));
}

#[test]
fn without_the_flag_claude_talks_to_its_own_base_url() {
    let t = setup();
    let output = t.agentpack(&["claude"], "sse,threads", &[]);
    assert_ok(&output);
    // The hot path starts no proxy thread (and no tokio worker).
    let threads = t.seen("threads");
    assert!(
        !threads.contains("agentpack-proxy") && !threads.contains("tokio"),
        "{threads}"
    );
    let base = std::fs::read_to_string(t.out.join("base_url.txt")).unwrap();
    assert_eq!(base, t.upstream.url());
    assert!(!t.logs.exists());
}

/// The pinned Claude Code itself (`AGENTPACK_TEST_AGENTS_BIN`), in print mode, through the proxy:
/// it gets the fake upstream's answer, and the log has the line without its API key.
#[test]
fn the_real_claude_code_in_print_mode_works_through_the_proxy() {
    let Some(bin) = agentpack_test_support::agents_bin() else {
        return;
    };
    let t = setup();
    let claude = bin.join("claude");
    let output = t.agentpack(
        &["--proxy", "claude", "-p", "say the word"],
        "",
        &[
            ("CLAUDE_PATH", claude.to_str().unwrap()),
            ("ANTHROPIC_API_KEY", SENTINEL_KEY),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
        ],
    );
    assert_ok(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(REAL_REPLY), "{stdout}");
    // The key reached the upstream unchanged, and only there.
    let seen = t.upstream.take();
    assert!(!seen.requests.is_empty());
    let first = String::from_utf8_lossy(&seen.requests[0]).into_owned();
    assert!(
        first.contains(&format!("x-api-key: {SENTINEL_KEY}\r\n")),
        "{first}"
    );
    let lines = t.log_lines();
    let message = lines
        .iter()
        .find(|l| l["path"] == "/v1/messages" && l["status"] == 200)
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(
        message["model"].as_str().unwrap().starts_with("claude"),
        "{message}"
    );
    assert!(
        message["usage"]["input_tokens"].as_u64().is_some(),
        "{message}"
    );
    assert!(message["request_id"]
        .as_str()
        .unwrap()
        .starts_with("req_real"));
    assert!(!t.all_log_text().contains("SENTINEL"));
}

/// (HTTP version, `x-api-key`) of each request an upstream saw.
type SeenVersions = Arc<Mutex<Vec<(String, String)>>>;

/// An HTTP/2-only (prior knowledge, h2c) upstream; answers with the stream of [`EVENTS`] and
/// records the version and the API key of each request.
fn start_h2c_upstream() -> (String, SeenVersions) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let record = record.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let key = request
                                .headers()
                                .get("x-api-key")
                                .map(|v| v.to_str().unwrap().to_string())
                                .unwrap_or_default();
                            record
                                .lock()
                                .unwrap()
                                .push((format!("{:?}", request.version()), key));
                            async move {
                                let response = hyper::Response::builder()
                                    .header("content-type", "text/event-stream")
                                    .header("request-id", "req_h2")
                                    .body(http_body_util::Full::new(bytes::Bytes::from(
                                        EVENTS.concat(),
                                    )))
                                    .unwrap();
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    (url, seen)
}

#[test]
fn the_http2_transport_speaks_h2_to_the_upstream() {
    let t = setup();
    let (url, seen) = start_h2c_upstream();
    let output = t.agentpack(
        &["--proxy", "claude"],
        "sse",
        &[
            ("AGENTPACK_PROXY_UPSTREAM", &url),
            ("AGENTPACK_PROXY_TRANSPORT", "http2"),
        ],
    );
    assert_ok(&output);
    assert_eq!(
        *seen.lock().unwrap(),
        [("HTTP/2.0".to_string(), SENTINEL_KEY.to_string())]
    );
    let sse = t.seen("sse");
    assert!(sse.starts_with("HTTP/1.1 200 OK"), "{sse}");
    assert!(sse.ends_with(&EVENTS.concat()), "{sse}");
    let line = &t.log_lines()[0];
    assert_eq!(line["upstream_version"], "HTTP/2");
    assert_eq!(line["request_id"], "req_h2");
    assert_eq!(line["usage"]["output_tokens"], 12);
}

#[test]
fn abandoned_and_cut_streams_and_idle_websockets_still_get_their_log_line() {
    let t = setup();
    let output = t.agentpack(
        &["--proxy", "claude"],
        "abort,ws-idle,cut",
        &[("AGENTPACK_PROXY_WS_IDLE_TIMEOUT_SECS", "1")],
    );
    assert_ok(&output);
    // The proxy closed the silent WebSocket after the idle timeout, not the client's 20 s. The
    // client's clock starts when its handshake returns, which on a loaded machine can be most of
    // a second after the proxy's idle timer started, so it may read 0 s; the log line's latency
    // (asserted below) is what proves the timer waited the full second.
    let idle = t.seen("ws-idle");
    assert!(
        ["closed after 0s", "closed after 1s", "closed after 2s"].contains(&idle.as_str()),
        "{idle}"
    );
    // A stream the upstream cut off is cut off for Claude too (no final chunk), not ended cleanly.
    assert_eq!(t.seen("cut"), "first event: true, terminated: false");
    let lines = t.log_lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let cut = lines.iter().find(|l| l["path"] == "/v1/cut").unwrap();
    assert_eq!(cut["error_type"], "upstream_body_error");
    assert_eq!(cut["usage"]["input_tokens"], 21);
    let abandoned = lines
        .iter()
        .find(|l| l["method"] == "POST" && l["path"] == "/v1/messages")
        .unwrap();
    assert_eq!(abandoned["status"], 200);
    assert_eq!(abandoned["error_type"], "client_closed");
    // What had arrived before Claude hung up is still read.
    assert_eq!(abandoned["usage"]["input_tokens"], 21);
    let websocket = lines.iter().find(|l| l["method"] == "GET").unwrap();
    assert_eq!(websocket["status"], 101);
    assert_eq!(websocket["path"], "/v1/idle");
    assert_eq!(websocket["error_type"], "ws_idle_timeout");
    assert!(websocket["latency_ms"].as_u64().unwrap() >= 1000);
}
